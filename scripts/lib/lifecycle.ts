/**
 * When a long-running CLI process must stop gracefully: on SIGTERM, SIGINT or SIGHUP, and when
 * its parent goes away. A supervisor may signal only the process it started (systemd with
 * KillMode=mixed, `docker stop` through an init): if that is a launcher such as npm, the launcher
 * may exit at once and leave this process running with another parent (npm 11 did, until
 * `npm run worker` exec'd node directly). A changed parent pid is that case: stop as if signalled.
 */
export interface StopWatch {
  /** Aborted with the reason ('SIGTERM', 'parent exited', …) when the process must stop. */
  signal: AbortSignal;
  /** Stop polling the parent (the signal handlers stay: see watchForStop). */
  dispose(): void;
}

export const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

export function watchForStop(options: { onStop?: (reason: string) => void; parentPollMs?: number } = {}): StopWatch {
  const controller = new AbortController();
  const stop = (reason: string) => {
    if (controller.signal.aborted) return; // a second signal (npm forwards the group's SIGTERM too) changes nothing
    options.onStop?.(reason);
    controller.abort(reason);
  };
  // The handlers stay until the process exits: a signal that comes while it winds down (the same
  // SIGTERM sent to the whole group and forwarded by npm arrives twice) must not fall back to the
  // default action, which kills the process by the signal (and makes npm exit 143).
  for (const name of STOP_SIGNALS) process.on(name, () => stop(name));
  // The parent this process started under. PID 1 (run by init, systemd or a container's init)
  // and 0 (this process is a container's PID 1) never go away, but polling them costs nothing.
  const parent = process.ppid;
  const poll = setInterval(() => {
    if (process.ppid !== parent) stop('parent exited');
  }, options.parentPollMs ?? 500);
  poll.unref();
  return {
    signal: controller.signal,
    dispose() {
      clearInterval(poll);
    },
  };
}
