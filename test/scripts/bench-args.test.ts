import { describe, expect, it } from 'vitest';
import { parseBenchArgs } from '../../bench/args.ts';

describe('bench arguments: the end-to-end clock mode', () => {
  it('is off unless asked for; --e2e alone keeps the existing end-to-end run', () => {
    expect(parseBenchArgs([]).clock.enabled).toBe(false);
    const e2e = parseBenchArgs(['--e2e']);
    expect(e2e.e2e.enabled).toBe(true);
    expect(e2e.clock.enabled).toBe(false);
  });

  it('--e2e-clock measures this tree only, with the full sizes', () => {
    const { clock, runs, e2e } = parseBenchArgs(['--e2e-clock']);
    expect(clock).toEqual({
      enabled: true, base: null, quick: false, steps: 30, stepDelayMs: 2000,
      inserts: 10, insertWindowSeconds: 120, pushes: 10, pushWindowSeconds: 120, idleSeconds: 120,
    });
    expect(runs).toBe(3);
    expect(e2e.jobs).toBe(2000);
  });

  it('--base implies the clock mode and keeps the ref as written', () => {
    expect(parseBenchArgs(['--base', 'origin/main']).clock).toMatchObject({ enabled: true, base: 'origin/main' });
    expect(parseBenchArgs(['--e2e-clock', '--base', 'HEAD~3']).clock.base).toBe('HEAD~3');
  });

  it('refuses a --base that is no git ref, naming it', () => {
    expect(() => parseBenchArgs(['--base', 'main; rm -rf /'])).toThrow(/--base must be a git ref .*got "main; rm -rf \/"/);
    expect(() => parseBenchArgs(['--base', ''])).toThrow(/--base must be a git ref/);
  });

  it('--e2e-clock-quick shortens every figure and runs one burn-down of 500 jobs; explicit options still win', () => {
    const quick = parseBenchArgs(['--e2e-clock-quick']);
    expect(quick.clock).toMatchObject({ enabled: true, quick: true, steps: 10, inserts: 3, pushes: 3, insertWindowSeconds: 30, idleSeconds: 30 });
    expect(quick.runs).toBe(1);
    expect(quick.e2e.jobs).toBe(500);
    const tuned = parseBenchArgs(['--e2e-clock-quick', '--runs', '2', '--clock-steps', '5', '--clock-window', '45', '--idle-seconds', '10']);
    expect(tuned.runs).toBe(2);
    expect(tuned.clock).toMatchObject({ steps: 5, insertWindowSeconds: 45, pushWindowSeconds: 45, idleSeconds: 10 });
  });

  it('refuses counts that are not positive integers, naming the option', () => {
    expect(() => parseBenchArgs(['--e2e-clock', '--clock-steps', '0'])).toThrow(/--clock-steps must be an integer >= 1, got "0"/);
    expect(() => parseBenchArgs(['--e2e-clock', '--idle-seconds', '1.5'])).toThrow(/--idle-seconds must be an integer >= 1/);
  });
});
