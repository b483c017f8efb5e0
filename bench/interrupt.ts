/**
 * Ctrl-C (or SIGTERM) while a bench holds stacks: run the shutdown `steps` once (stopInTurn), then
 * exit 130. Ctrl-C reaches this process more than once — from the terminal's process group and
 * again relayed by npm and tsx — and tsx exits a process at once on a signal it has no listener
 * for, so the listener stays until the steps are done and the repeats are ignored. Returns the
 * function that removes it.
 */
export function onInterrupt(what: string, steps: Array<() => unknown>): () => void {
  let stopping = false;
  const listener = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: ${what}`);
    void stopInTurn(steps)
      .catch((error: Error) => console.log(`  after ${signal}: ${error.message}`))
      .finally(() => {
        console.log('  stopped');
        process.exit(130);
      });
  };
  process.on('SIGINT', listener);
  process.on('SIGTERM', listener);
  return () => {
    process.off('SIGINT', listener);
    process.off('SIGTERM', listener);
  };
}

/**
 * Runs every step of a shutdown in turn, each whatever the ones before did (after Ctrl-C the
 * embedded Postgres may be gone already, and the folders must still go); throws the first error.
 */
export async function stopInTurn(steps: Array<() => unknown>): Promise<void> {
  const errors: unknown[] = [];
  for (const step of steps) await Promise.resolve().then(step).catch((error: unknown) => errors.push(error));
  if (errors.length) throw errors[0];
}
