import { describe, expect, it } from 'vitest';
import type { JobChildren, SpawnSettled } from '../../queue/index.ts';
import { checkFlowRound, type FlowRound } from '../../scripts/lib/model/flow-checks.ts';
import type { Op, SpawnChoice } from '../../scripts/lib/model/generator.ts';
import { Model } from '../../scripts/lib/model/model.ts';

/**
 * The model test's checker on rounds built by hand: what it must flag, and what it must not (a
 * checker that cries wolf under load is a flaky test, not a finding).
 */
const PARENT = '00000000-0000-7000-8000-000000000001';
const child = (text: string) => ({ type: 'uppercase', payload: { text } });
const spawnOp = (client: number, token: string, spawn: SpawnChoice): Op =>
  ({ kind: 'settle', client, lease: { jobId: PARENT, token, lockedUntil: 0, zombie: client === 3 }, how: 'spawn', delayMs: 0, spawn });
const settled = (n: number, created = n): SpawnSettled => ({ waitNo: 1, total: n, created, adopted: 0, ended: 0, need: n, joined: false }) as SpawnSettled;
const children = (ids: string[]): JobChildren =>
  ({ children: ids.map((id) => ({ id, status: 'queued' })) }) as unknown as JobChildren;

function round(outcomes: FlowRound['outcomes'], taken: { spawn: SpawnChoice; settled: SpawnSettled; given: string[] }): FlowRound {
  return {
    outcomes, timedOut: [], after: new Map(), fresh: [], resumed: new Map(), rateSamples: [],
    spawned: new Map([[PARENT, { ...taken, children: children(taken.given) }]]),
  };
}

describe('the model checker, on a spawn', () => {
  const two: SpawnChoice = { children: [child('a'), child('b')], join: 'all' };
  const one: SpawnChoice = { children: [child('z')], join: 'all' };
  const model = () => new Model({ pools: [], keyLimits: {}, weightCost: {}, leaseMs: 30_000 }, 0);

  it("checks the spawn the database took, not a stale owner's refused spawn of the same parent in the round", () => {
    const r = round(
      [{ op: spawnOp(3, 'stale', one), value: null }, { op: spawnOp(0, 'current', two), value: settled(2) }],
      { spawn: two, settled: settled(2), given: ['c1', 'c2'] },
    );
    expect(checkFlowRound(model(), r).filter((v) => v.invariant === 'join')).toEqual([]);
  });

  it('flags a spawn answered otherwise than it asked', () => {
    const r = round([{ op: spawnOp(0, 'current', two), value: settled(2, 1) }], { spawn: two, settled: settled(2, 1), given: ['c1', 'c2'] });
    expect(checkFlowRound(model(), r).map((v) => v.invariant)).toContain('join');
  });
});
