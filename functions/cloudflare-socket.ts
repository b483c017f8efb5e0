import postgres from 'postgres';
import { connect } from 'cloudflare:sockets';
import { Buffer } from 'node:buffer';
import { EventEmitter } from 'node:events';
import { currentUsage } from './usage.ts';

/**
 * The TCP socket postgres.js uses inside the Worker (its `socket` option), over
 * `cloudflare:sockets`. postgres.js's bundled one reports a read that fails after a deliberate
 * close ("This socket has been closed.") on an emitter whose listeners postgres.js has already
 * removed, which surfaces as an unhandled rejection after every `sql.end()`. Here the end of
 * the stream, a close, and a failed read all settle the socket once, and an error is only
 * emitted while someone listens for it.
 *
 * Inside withUsage() each connect counts one 'socket' subrequest and holds one open connection
 * until the socket settles (closed, ended or failed), including a connect that never opens.
 */
export interface PostgresSocketOptions {
  host: string[];
  port: number[];
}

export async function openPostgresSocket(options: PostgresSocketOptions): Promise<EventEmitter> {
  const usage = currentUsage();
  usage?.countSubrequest('socket');
  const release = usage?.openConnection('socket');
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
    release?.();
    socket.readyState = 'closed';
    if (error && socket.listenerCount('error') > 0) socket.emit('error', error);
    socket.emit('close', Boolean(error));
  }

  raw.closed.then(() => settle(), (error) => settle(unreachable(error)));
  try {
    await raw.opened;
  } catch (error) {
    release?.();
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

/**
 * Array parameters without reading the server's type list. postgres.js learns each parameter's
 * type from the server when it prepares a statement (`$5::text[]` → text[]), but it serializes
 * an array only for the array types it fetched on connect; with `fetch_types: false` a JS array
 * would be sent as `a,b,c`, which Postgres refuses ("malformed array literal"). These are the
 * scalar array types the engine passes (the claim's job types are a text[]), as array literals.
 */
const ARRAY_TYPES = { text: 1009, varchar: 1015, int4: 1007, int8: 1016, uuid: 2951 } as const;

function arrayElement(x: unknown): string {
  if (x === null || x === undefined) return 'NULL';
  const text = x instanceof Date ? x.toISOString() : String(x);
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** A one-dimensional array as a Postgres array literal; a string is taken as a literal already. */
export function arrayLiteral(xs: unknown): string {
  if (!Array.isArray(xs)) return String(xs);
  return `{${xs.map(arrayElement).join(',')}}`;
}

const arrayTypes = Object.fromEntries(
  Object.entries(ARRAY_TYPES).map(([name, oid]) => [`${name}_array`, { to: oid, serialize: arrayLiteral }]),
);

/** A postgres.js client for use inside the Worker, on the socket above. */
export function connectInWorker(url: string, options: { max: number; applicationName?: string }): import('../queue/index.ts').Sql {
  const settings = {
    max: options.max,
    // no round trip to read the server's types on connect; array parameters are serialized by
    // arrayTypes (results of array type stay the server's text form)
    fetch_types: false,
    types: arrayTypes,
    socket: openPostgresSocket,
    onnotice: () => {},
    connection: { application_name: options.applicationName ?? 'starbase-worker' },
  };
  return postgres(url, settings as postgres.Options<{}>) as unknown as import('../queue/index.ts').Sql;
}
