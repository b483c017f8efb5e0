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
});
