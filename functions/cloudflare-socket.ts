import postgres from 'postgres';
import { connect } from 'cloudflare:sockets';
import { Buffer } from 'node:buffer';
import { EventEmitter } from 'node:events';

/**
 * The TCP socket postgres.js uses inside the Worker (its `socket` option), over
 * `cloudflare:sockets`. postgres.js's bundled one reports a read that fails after a deliberate
 * close ("This socket has been closed.") on an emitter whose listeners postgres.js has already
 * removed, which surfaces as an unhandled rejection after every `sql.end()`. Here the end of
 * the stream, a close, and a failed read all settle the socket once, and an error is only
 * emitted while someone listens for it.
 */
export interface PostgresSocketOptions {
  host: string[];
  port: number[];
}

export async function openPostgresSocket(options: PostgresSocketOptions): Promise<EventEmitter> {
  const raw = connect({ hostname: options.host[0]!, port: options.port[0]! });
  const writer = raw.writable.getWriter();
  const reader = raw.readable.getReader();
  const socket = Object.assign(new EventEmitter(), {
    readyState: 'open' as 'open' | 'closed',
    write(data: Uint8Array, callback?: () => void): boolean {
      writer.write(data).then(() => callback?.(), (error) => settle(unreachable(error)));
      return true;
    },
    end(data?: Uint8Array): void {
      const close = () => void raw.close().catch(() => {});
      if (data) writer.write(data).then(close, close);
      else close();
    },
    destroy(): void {
      void raw.close().catch(() => {});
    },
  });

  let settled = false;
  function settle(error?: unknown): void {
    if (settled) return;
    settled = true;
    socket.readyState = 'closed';
    if (error && socket.listenerCount('error') > 0) socket.emit('error', error);
    socket.emit('close', Boolean(error));
  }

  raw.closed.then(() => settle(), (error) => settle(unreachable(error)));
  try {
    await raw.opened;
  } catch (error) {
    throw unreachable(error);
  }
  void (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        socket.emit('data', Buffer.from(value));
      }
      settle();
    } catch (error) {
      settle(unreachable(error));
    }
  })();
  return socket;
}

/**
 * The runtime's socket errors carry no code ("proxy request failed, cannot connect to the
 * specified address", "Network connection lost"): give them one, so the API can answer 503.
 */
function unreachable(error: unknown): Error {
  const message = error instanceof Error ? error.message : String(error);
  return Object.assign(new Error(`database connection failed: ${message}`), { code: 'DATABASE_UNREACHABLE' });
}

/** A postgres.js client for use inside the Worker, on the socket above. */
export function connectInWorker(url: string, options: { max: number; applicationName?: string }): import('../queue/index.ts').Sql {
  const settings = {
    max: options.max,
    // no round trip to read the server's types on connect: every array parameter is cast in SQL
    fetch_types: false,
    socket: openPostgresSocket,
    onnotice: () => {},
    connection: { application_name: options.applicationName ?? 'starbase-worker' },
  };
  return postgres(url, settings as postgres.Options<{}>) as unknown as import('../queue/index.ts').Sql;
}
