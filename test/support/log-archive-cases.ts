import { describe, expect, it } from 'vitest';
import { archiveKey, ConditionalLogArchive, type LogObjectStore } from '../../functions/platform/build/adapters/conditional-log-archive.ts';
import { LogSequenceGapError } from '../../functions/platform/build/ports/log-archive.ts';

/** A fresh, empty store of a production adapter, and a way to see what it holds (not through the archive). */
export interface StoreUnderTest {
  store: LogObjectStore;
  /** Every build-log object's key and text, as the store's own API or records say. */
  objects(): Promise<Map<string, string>>;
}

/** A store counting the conditional writes it made (refused ones not counted). */
function counting(store: LogObjectStore): { store: LogObjectStore; writes: () => number } {
  let writes = 0;
  return {
    store: {
      get: (key) => store.get(key),
      async putIf(key, log, etag) {
        const written = await store.putIf(key, log, etag);
        if (written) writes++;
        return written;
      },
    },
    writes: () => writes,
  };
}

const line = (seq: number) => ({ seq, text: `line ${seq}` });
const lines = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => line(from + i));
const textOf = (to: number) => lines(1, to).map((l) => `${l.text}\n`).join('');

/**
 * A store that runs `before` once, just before its next conditional write reaches the real
 * store: another writer's whole append slips in between this writer's read and its write.
 */
function racing(store: LogObjectStore): { store: LogObjectStore; before(run: () => Promise<unknown>): void } {
  let hook: (() => Promise<unknown>) | undefined;
  return {
    store: {
      get: (key) => store.get(key),
      async putIf(key, log, etag) {
        const run = hook;
        hook = undefined;
        await run?.();
        return store.putIf(key, log, etag);
      },
    },
    before(run) {
      hook = run;
    },
  };
}

/**
 * The log archive's promises (ports/log-archive.ts), the same cases for every store: run once
 * per store with a factory that gives a fresh, empty one.
 */
export function logArchiveCases(storeName: string, makeStore: () => Promise<StoreUnderTest>): void {
  const make = async () => {
    const made = await makeStore();
    const counted = counting(made.store);
    return { store: counted.store, archive: new ConditionalLogArchive(counted.store), objects: made.objects, writes: async () => counted.writes() };
  };
  describe(`log archive in ${storeName}`, () => {
    it('keeps one object per build, appends idempotently by sequence number, and refuses gaps', async () => {
      const t = await make();
      expect(await t.archive.read('job-1')).toBeNull();
      await t.archive.append('job-1', lines(1, 2));
      await t.archive.append('job-1', lines(1, 3));
      expect(await t.archive.append('job-1', lines(2, 3))).toEqual({ text: textOf(3), lastSeq: 3 });
      await expect(t.archive.append('job-1', [line(5)])).rejects.toBeInstanceOf(LogSequenceGapError);
      expect(await t.archive.read('job-1')).toEqual({ text: textOf(3), lastSeq: 3 });
      expect([...(await t.objects())]).toEqual([[archiveKey('job-1'), textOf(3)]]);
      expect(await t.writes()).toBe(2); // the repeat wrote nothing
    });

    it('two writers racing: the one whose ETag went stale re-reads and merges, never shortening the object', async () => {
      const t = await make();
      const other = new ConditionalLogArchive(t.store);
      await t.archive.append('job-2', lines(1, 1));
      const slow = racing(t.store);
      const stale = new ConditionalLogArchive(slow.store);
      // the slow writer read line 1 and its ETag; the other writer appends 2–4 before the slow one writes
      slow.before(() => other.append('job-2', lines(1, 4)));
      expect(await stale.append('job-2', lines(2, 2))).toEqual({ text: textOf(4), lastSeq: 4 });
      expect((await t.objects()).get(archiveKey('job-2'))).toBe(textOf(4));
      // and the slow writer's next lines land after the other's
      slow.before(() => other.append('job-2', lines(5, 5)));
      expect(await stale.append('job-2', lines(5, 6))).toEqual({ text: textOf(6), lastSeq: 6 });
      expect((await t.archive.read('job-2'))!.text).toBe(textOf(6));
    });

    it('two writers racing to create the object: the one that lost merges into the winner’s', async () => {
      const t = await make();
      const slow = racing(t.store);
      slow.before(() => new ConditionalLogArchive(t.store).append('job-3', lines(1, 1)));
      expect(await new ConditionalLogArchive(slow.store).append('job-3', lines(1, 2))).toEqual({ text: textOf(2), lastSeq: 2 });
      expect((await t.objects()).get(archiveKey('job-3'))).toBe(textOf(2));
    });

    it('a worker that lost its lease, re-polling from an older cursor, cannot shorten the object', async () => {
      const t = await make();
      const owner = t.archive;
      await owner.append('job-4', lines(1, 5));
      const writesBefore = await t.writes();
      // the old owner still holds lines 1–3 from its last poll
      const oldOwner = new ConditionalLogArchive(t.store);
      expect(await oldOwner.append('job-4', lines(1, 3))).toEqual({ text: textOf(5), lastSeq: 5 });
      // and one that read the archive at line 3, with the new owner writing 4–5 meanwhile
      await owner.append('job-5', lines(1, 3));
      const slow = racing(t.store);
      slow.before(() => owner.append('job-5', lines(4, 5)));
      expect(await new ConditionalLogArchive(slow.store).append('job-5', lines(3, 4))).toEqual({ text: textOf(5), lastSeq: 5 });
      const objects = await t.objects();
      expect(objects.get(archiveKey('job-4'))).toBe(textOf(5));
      expect(objects.get(archiveKey('job-5'))).toBe(textOf(5));
      expect(await t.writes()).toBe(writesBefore + 2); // job-5's two writes; the old owner wrote nothing
    });
  });
}
