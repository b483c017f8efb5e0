import { createServer, type IncomingMessage, type Server } from 'node:http';

/**
 * The sandbox: one local HTTP server that speaks the external SaaS APIs (Depot, DigitalOcean,
 * Stripe, Spaces) so that tests and `npm start` exercise the real adapters. Each provider is a module
 * that recognises its own paths; every call is recorded. Control endpoints under /_sandbox/
 * let tests (including those inside workerd) script behaviour and read the records over HTTP.
 */

export interface SandboxRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: Record<string, string>;
  /** The raw body. */
  body: string;
}

export interface SandboxResponse {
  status: number;
  headers?: Record<string, string>;
  /** A string is sent as is; anything else as JSON. */
  body?: unknown;
}

export interface RecordedCall {
  provider: string;
  method: string;
  path: string;
  query: string;
  body: unknown;
  headers: Record<string, string>;
  at: string;
}

export interface SandboxProvider {
  name: string;
  /** Answer a request to the provider's API, or undefined when the path is not this provider's. */
  handle(req: SandboxRequest): Promise<SandboxResponse | undefined> | SandboxResponse | undefined;
  /** Answer POST/GET /_sandbox/<name>/<path> (scripting from tests). */
  control?(path: string, req: SandboxRequest): Promise<SandboxResponse> | SandboxResponse;
  /** Forget all state (between tests). */
  reset?(): void;
}

export interface SandboxHandle {
  url: string;
  port: number;
  calls(provider?: string): RecordedCall[];
  reset(): void;
  close(): Promise<void>;
}

export function parseBody(req: SandboxRequest): unknown {
  const type = req.headers['content-type'] ?? '';
  if (!req.body) return null;
  if (type.includes('application/json')) {
    try {
      return JSON.parse(req.body);
    } catch {
      return req.body;
    }
  }
  if (type.includes('application/x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(req.body));
  return req.body;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

// Recorded headers leave credentials out: the sandbox's records are shown in test output.
const RECORDED_HEADERS = ['content-type', 'idempotency-key', 'stripe-version', 'connect-protocol-version', 'if-match', 'if-none-match'];

export async function startSandbox(options: { port?: number; host?: string; providers: SandboxProvider[] }): Promise<SandboxHandle> {
  const calls: RecordedCall[] = [];
  const providers = options.providers;
  const server: Server = createServer(async (incoming, res) => {
    try {
      const url = new URL(incoming.url ?? '/', 'http://sandbox');
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(incoming.headers)) if (typeof v === 'string') headers[k] = v;
      const req: SandboxRequest = { method: incoming.method ?? 'GET', path: url.pathname, query: url.searchParams, headers, body: await readBody(incoming) };
      let answer: SandboxResponse | undefined;
      if (req.path.startsWith('/_sandbox/')) {
        answer = control(req);
        if (answer === undefined) {
          const [, , name, ...rest] = req.path.split('/');
          const provider = providers.find((p) => p.name === name);
          answer = provider?.control ? await provider.control(`/${rest.join('/')}`, req) : { status: 404, body: { error: `no sandbox control ${req.path}` } };
        }
      } else {
        for (const provider of providers) {
          answer = await provider.handle(req);
          if (answer) {
            const recorded: Record<string, string> = {};
            for (const h of RECORDED_HEADERS) if (headers[h]) recorded[h] = headers[h]!;
            calls.push({ provider: provider.name, method: req.method, path: req.path, query: url.search, body: parseBody(req), headers: recorded, at: new Date().toISOString() });
            break;
          }
        }
        answer ??= { status: 404, body: { error: `the sandbox has no route for ${req.method} ${req.path}` } };
      }
      const isText = typeof answer.body === 'string';
      res.writeHead(answer.status, { 'content-type': isText ? 'text/plain' : 'application/json', ...answer.headers });
      res.end(answer.body === undefined ? '' : isText ? (answer.body as string) : JSON.stringify(answer.body));
    } catch (error) {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: `sandbox error: ${(error as Error).message}` }));
    }
  });

  function reset() {
    calls.length = 0;
    for (const p of providers) p.reset?.();
  }

  function control(req: SandboxRequest): SandboxResponse | undefined {
    if (req.path === '/_sandbox/calls') {
      const provider = req.query.get('provider');
      return { status: 200, body: { calls: provider ? calls.filter((c) => c.provider === provider) : calls } };
    }
    if (req.path === '/_sandbox/reset' && req.method === 'POST') {
      reset();
      return { status: 200, body: { ok: true } };
    }
    return undefined;
  }

  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, host, resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://${host}:${port}`,
    port,
    calls: (provider) => (provider ? calls.filter((c) => c.provider === provider) : [...calls]),
    reset,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
