import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Runs `pass` every `everyMs` (measured from the start of one pass to the next, a pass never
 * overlapping the one before) until stopped: a system's periodic retention sweep in sustained
 * mode. A pass that throws is printed and the next one runs: a sweep that fails shows as rows left.
 */
export function repeatEvery(everyMs: number, pass: () => Promise<void>): { stop(): Promise<void> } {
  const stopped = new AbortController();
  const done = (async () => {
    while (!stopped.signal.aborted) {
      const started = performance.now();
      try {
        await pass();
      } catch (error) {
        console.error(`retention sweep failed: ${(error as Error).message}`);
      }
      const wait = everyMs - (performance.now() - started);
      if (wait > 0) await sleep(wait, undefined, { signal: stopped.signal }).catch(() => {});
    }
  })();
  return {
    async stop() {
      stopped.abort();
      await done;
    },
  };
}
