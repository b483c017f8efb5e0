import { readFileSync } from 'node:fs';
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

describe('bench arguments: the sustained mode', () => {
  it('is off unless asked for; --sustained runs 2,000 jobs/s for 60 s', () => {
    expect(parseBenchArgs([]).sustained.enabled).toBe(false);
    expect(parseBenchArgs(['--sustained']).sustained).toEqual({ enabled: true, rate: 2000, seconds: 60 });
  });

  it('takes the rate and the length, and --runs and --only as the other modes do', () => {
    const args = parseBenchArgs(['--sustained', '--sustained-rate', '500', '--sustained-seconds', '5', '--runs', '1', '--only', 'starbase, pg-boss']);
    expect(args.sustained).toEqual({ enabled: true, rate: 500, seconds: 5 });
    expect(args.runs).toBe(1);
    expect(args.only).toEqual(['starbase', 'pg-boss']);
  });

  it('refuses a rate or a length that is not a positive integer, naming the option', () => {
    expect(() => parseBenchArgs(['--sustained', '--sustained-rate', '0'])).toThrow(/--sustained-rate must be an integer >= 1, got "0"/);
    expect(() => parseBenchArgs(['--sustained', '--sustained-seconds', '2.5'])).toThrow(/--sustained-seconds must be an integer >= 1, got "2.5"/);
  });
});

describe('bench arguments: the scale sizes', () => {
  it('default to 1,000,000 finished and 100,000 queued jobs', () => {
    const args = parseBenchArgs(['--scale']);
    expect(args.scale).toBe(true);
    expect([args.scaleFinished, args.scaleQueued]).toEqual([1_000_000, 100_000]);
  });

  it('take 10M + 1M as written; finished may be 0 (an empty history), queued may not', () => {
    const args = parseBenchArgs(['--scale', '--scale-finished', '10000000', '--scale-queued', '1000000']);
    expect([args.scaleFinished, args.scaleQueued]).toEqual([10_000_000, 1_000_000]);
    expect(parseBenchArgs(['--scale', '--scale-finished', '0']).scaleFinished).toBe(0);
    expect(() => parseBenchArgs(['--scale', '--scale-queued', '0'])).toThrow(/--scale-queued must be an integer >= 1/);
    expect(() => parseBenchArgs(['--scale', '--scale-finished', '10M'])).toThrow(/--scale-finished must be an integer >= 0, got "10M"/);
  });
});

describe("bench/README.md's bench commands", () => {
  // Every `npm run bench -- …` line of the README's shell blocks parses (a renamed or dropped
  // option fails here); --help is left out, it prints and exits.
  const readme = readFileSync(new URL('../../bench/README.md', import.meta.url), 'utf8');
  const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const commands = blocks.flatMap((b) => b.split('\n')).filter((line) => line.startsWith('npm run bench -- ') && !line.includes('--help'));

  it('include the sustained and the scale commands', () => {
    expect(commands.some((c) => c.includes('--sustained'))).toBe(true);
    expect(commands.some((c) => c.includes('--scale-finished 10000000'))).toBe(true);
  });

  it.each(commands)('%s', (command) => {
    // words as the shell splits them: a quoted value (--cli-args="--concurrency 5") is one word
    const words = (command.replace(/\s#.*$/, '').trim().match(/(?:[^\s"]+|"[^"]*")+/g) ?? []).map((w) => w.replace(/"/g, ''));
    const argv = words.slice('npm run bench --'.split(' ').length);
    expect(() => parseBenchArgs(argv)).not.toThrow();
  });
});
