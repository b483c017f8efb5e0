import { describe, expect, it } from 'vitest';
import { readConfig, type WorkerEnv } from '../../functions/config.ts';
import { testEnv } from './support.ts';

/** Issue 15, item 4: the env is parsed once per env object into a typed config. */
describe('the typed config', () => {
  it('is parsed once per env object, and again for another object', () => {
    const env = { ...testEnv } as WorkerEnv;
    const first = readConfig(env);
    expect(readConfig(env)).toBe(first);
    expect(readConfig({ ...env })).not.toBe(first);
    expect(readConfig({ ...env })).toEqual(first);
  });

  it('holds the platform settings, with empty ones unset', () => {
    const config = readConfig({ ...testEnv, DEPOT_PROJECT_ID: '', TALOS_IMAGE: '42', DASHBOARD_URL: 'https://ops.example/' } as WorkerEnv);
    expect(config.platform.DEPOT_PROJECT_ID).toBeUndefined();
    expect(config.platform.TALOS_IMAGE).toBe('42');
    expect(config.dashboardUrl).toBe('https://ops.example');
  });

  it('a refused env is refused again, naming the var (nothing kept from the first try)', () => {
    const env = { ...testEnv, TICK_BUDGET_MS: '12' } as WorkerEnv;
    expect(() => readConfig(env)).toThrow('TICK_BUDGET_MS must be an integer from 100 to 600000, got 12');
    expect(() => readConfig(env)).toThrow('TICK_BUDGET_MS must be an integer from 100 to 600000, got 12');
  });

  it('a misspelt var does not compile', () => {
    const env = testEnv as WorkerEnv;
    // @ts-expect-error TICK_BUDGET is not a var the Worker declares
    expect(env.TICK_BUDGET).toBeUndefined();
  });

  it('reads the per-invocation budgets, and sizes the database client from the connection budget', () => {
    const config = readConfig({ ...testEnv, CPU_BUDGET_MS: '25000', SUBREQUEST_BUDGET: '40', CONNECTION_BUDGET: '5', STEP_CONCURRENCY: '3' } as WorkerEnv);
    expect(config.budgets).toEqual({ cpuMs: 25_000, subrequests: 40, connections: 5 });
    expect(config.databaseConnections).toBe(2);
    // the shipped wrangler.toml: 6 connections, 4 steps in flight, 2 for the database client
    expect(readConfig({ ...testEnv } as WorkerEnv).databaseConnections).toBe(2);
  });

  it('refuses budgets past the limits they guard, and steps that would leave the database no connection', () => {
    expect(() => readConfig({ ...testEnv, CPU_BUDGET_MS: '300000' } as WorkerEnv)).toThrow('CPU_BUDGET_MS must be an integer from 1000 to 290000, got 300000');
    expect(() => readConfig({ ...testEnv, SUBREQUEST_BUDGET: '10001' } as WorkerEnv)).toThrow('SUBREQUEST_BUDGET must be an integer from 10 to 10000');
    expect(() => readConfig({ ...testEnv, CONNECTION_BUDGET: '7' } as WorkerEnv)).toThrow('CONNECTION_BUDGET must be an integer from 2 to 6');
    expect(() => readConfig({ ...testEnv, CONNECTION_BUDGET: '4', STEP_CONCURRENCY: '4' } as WorkerEnv)).toThrow(
      'STEP_CONCURRENCY (4) must be below CONNECTION_BUDGET (4)',
    );
    expect(() => readConfig({ ...testEnv, IDLE_POLL_MS: '-1' } as WorkerEnv)).toThrow('IDLE_POLL_MS must be an integer from 0 to 60000');
    expect(() => readConfig({ ...testEnv, DISPATCH_SHARDS: 'two' } as WorkerEnv)).toThrow('DISPATCH_SHARDS must be an integer from 0 to 64');
  });
});
