import { describe, expect, it } from 'vitest';
import { stopInTurn } from '../../bench/interrupt.ts';

describe("a bench's shutdown steps", () => {
  it('all run, in order, whatever the ones before did, and the first error is what it throws', async () => {
    const ran: string[] = [];
    const done = stopInTurn([
      () => ran.push('stack'),
      () => {
        ran.push('drop');
        throw new Error('the database system is shutting down');
      },
      async () => {
        ran.push('probe');
        throw new Error('second');
      },
      () => ran.push('folder'),
    ]);
    await expect(done).rejects.toThrow('the database system is shutting down');
    expect(ran).toEqual(['stack', 'drop', 'probe', 'folder']);
  });

  it('resolves when every step did', async () => {
    const ran: number[] = [];
    await stopInTurn([() => ran.push(1), async () => ran.push(2)]);
    expect(ran).toEqual([1, 2]);
  });
});
