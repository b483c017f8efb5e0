import { describe, expect, it } from 'vitest';
import { parseBenchArgs } from '../../bench/args.ts';

describe('bench arguments: the CLI mode', () => {
  it('is off unless asked for', () => {
    expect(parseBenchArgs([]).cli).toEqual({ enabled: false, args: [] });
  });

  it('--cli runs the worker at its defaults only; --jobs and --runs apply', () => {
    const args = parseBenchArgs(['--cli', '--jobs', '20000', '--runs', '5']);
    expect(args.cli).toEqual({ enabled: true, args: [] });
    expect(args).toMatchObject({ jobs: 20_000, runs: 5 });
  });

  it('--cli-args implies --cli and splits the extra worker arguments on spaces', () => {
    expect(parseBenchArgs(['--cli-args=--concurrency 5  --connections 7']).cli).toEqual({
      enabled: true,
      args: ['--concurrency', '5', '--connections', '7'],
    });
  });
});
