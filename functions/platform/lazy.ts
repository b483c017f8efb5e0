import type { JobType } from '../../queue/registry.ts';

/**
 * A stand-in for an adapter while a job type is only declared: the job type factories keep their
 * adapters for the steps and touch none while they build the declaration, and this one makes sure
 * of it (any use throws, naming what was used too early).
 */
export function unbuilt<T extends object>(what: string): T {
  return new Proxy({} as T, {
    get(_target, property) {
      if (property === 'then') return undefined; // not a thenable
      throw new Error(`${what} was used before it was built (a job type's declaration must not call its adapters)`);
    },
  });
}

/**
 * A job type declared now and built on first use. `declared` carries what the registry reads
 * without running a step (name, options, payload schema: the sync and enqueue read only these);
 * its handlers are never called. `build` makes the type with its adapters (API clients, the key
 * ring) the first time one of its steps, cancels or failure hooks runs in this invocation, and
 * only then; `onBuild` hears of it (the composition root counts the types it built).
 */
export function lazyJobType<P>(declared: JobType<P>, build: () => JobType<P> | Promise<JobType<P>>, onBuild?: (type: string) => void): JobType<P> {
  let built: Promise<JobType<P>> | undefined;
  const real = (): Promise<JobType<P>> => {
    if (!built) {
      onBuild?.(declared.type);
      built = Promise.resolve().then(build);
    }
    return built;
  };
  const { run: _run, onCancel, onFailed, ...declaration } = declared;
  return {
    ...declaration,
    run: async (ctx) => (await real()).run(ctx),
    ...(onCancel ? { onCancel: async (ctx: Parameters<typeof onCancel>[0]) => (await real()).onCancel!(ctx) } : {}),
    ...(onFailed ? { onFailed: async (ctx: Parameters<typeof onFailed>[0], error: string) => (await real()).onFailed!(ctx, error) } : {}),
  };
}
