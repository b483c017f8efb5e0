import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What one Worker invocation has spent of the budgets Cloudflare enforces per invocation, so a
 * drain can stop claiming steps before the platform stops it. Local runs (workerd under
 * miniflare / `wrangler dev`) enforce none of these limits, so the engine counts them itself.
 *
 * The limits, from Cloudflare's "Limits" page (Workers → Platform → Limits):
 * - CPU time: 30 s per invocation by default on Workers Paid, up to 5 min with `limits.cpu_ms`
 *   (10 ms on Free). Workers expose no CPU clock (`Date.now()` only advances across I/O), so
 *   elapsed wall time is counted instead; CPU time never exceeds it, so this errs early.
 * - Subrequests: 10,000 per invocation on Workers Paid (configurable with `limits.subrequests`),
 *   50 on Free. Each `fetch()` is one, and so is each request to a Cloudflare service made
 *   through a binding (an R2 get, put or delete; KV; Cache).
 * - Simultaneous open connections: 6 per invocation. The page's "Simultaneous open connections"
 *   section lists `fetch()`, KV, Cache, R2, Queues, service bindings and `connect()` (TCP) as
 *   what holds one. Since the changelog entry "Relaxed simultaneous connection limiting for
 *   Workers" (2026-04-09), a fetch's slot frees when its response headers arrive, not when its
 *   body is read.
 *
 * Where the docs are silent this counts, so a drain errs toward stopping early:
 * - a TCP `connect()` (the Postgres socket) counts one subrequest as well as one connection;
 * - a Durable Object stub call (RPC) counts one subrequest.
 * Where counting more is safer it does: a fetch holds its connection until its body is fully
 * read, cancelled or failed (the rule before 2026-04-09); a response with no body, or a 101
 * upgrade, releases at once. R2 and Durable Object calls count as subrequests only, not as
 * open connections: each lasts just the call its caller awaits.
 */
export interface UsageBudgets {
  /** Stop claiming once this much time has passed since the invocation began. Workers expose no
   *  CPU clock (Date.now() only advances across I/O), so elapsed wall time is counted: CPU ≤ elapsed. */
  cpuMs: number;
  /** Stop claiming once this many subrequests were made. */
  subrequests: number;
  /** Simultaneous open outgoing connections allowed (reported; the drain sizes itself from it). */
  connections: number;
}

export type SubrequestKind = 'fetch' | 'socket' | 'durable-object' | 'r2';

const KINDS: readonly SubrequestKind[] = ['fetch', 'socket', 'durable-object', 'r2'];

export interface UsageSnapshot {
  elapsedMs: number;
  subrequests: number;
  byKind: Record<SubrequestKind, number>;
  openConnections: number;
  peakConnections: number;
  /** Which kinds hold the connections open now. */
  openByKind: Record<SubrequestKind, number>;
}

export interface SpentBudget {
  budget: 'cpu' | 'subrequests';
  used: number;
  limit: number;
}

function zeroByKind(): Record<SubrequestKind, number> {
  return Object.fromEntries(KINDS.map((k) => [k, 0])) as Record<SubrequestKind, number>;
}

function checkBudget(name: keyof UsageBudgets, value: unknown, integer: boolean): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new Error(`usage budget ${name} must be a positive ${integer ? 'integer' : 'number'}, got ${String(value)}`);
  }
  return value;
}

/** The counter for one invocation: create it when the invocation begins. */
export class InvocationUsage {
  readonly budgets: Readonly<UsageBudgets>;
  private readonly startedAt: number;
  private subrequestCount = 0;
  private readonly byKind = zeroByKind();
  private readonly openByKind = zeroByKind();
  private open = 0;
  private peak = 0;

  constructor(budgets: UsageBudgets, private readonly clock: () => number = Date.now) {
    this.budgets = Object.freeze({
      cpuMs: checkBudget('cpuMs', budgets?.cpuMs, false),
      subrequests: checkBudget('subrequests', budgets?.subrequests, true),
      connections: checkBudget('connections', budgets?.connections, true),
    });
    this.startedAt = clock();
  }

  countSubrequest(kind: SubrequestKind): void {
    if (!KINDS.includes(kind)) throw new Error(`unknown subrequest kind: ${String(kind)}`);
    this.subrequestCount++;
    this.byKind[kind]++;
  }

  /**
   * A connection opened; call the returned function (idempotent) when it closes. This counts
   * the connection only: the subrequest that opened it is counted with countSubrequest.
   */
  openConnection(kind: SubrequestKind): () => void {
    if (!KINDS.includes(kind)) throw new Error(`unknown connection kind: ${String(kind)}`);
    this.open++;
    this.openByKind[kind]++;
    this.peak = Math.max(this.peak, this.open);
    let closed = false;
    return () => {
      if (closed) return;
      closed = true;
      this.open--;
      this.openByKind[kind]--;
    };
  }

  /** Which budget is spent (reached counts as spent), or null. */
  exhausted(): SpentBudget | null {
    const elapsed = this.clock() - this.startedAt;
    if (elapsed >= this.budgets.cpuMs) return { budget: 'cpu', used: elapsed, limit: this.budgets.cpuMs };
    if (this.subrequestCount >= this.budgets.subrequests) {
      return { budget: 'subrequests', used: this.subrequestCount, limit: this.budgets.subrequests };
    }
    return null;
  }

  snapshot(): UsageSnapshot {
    return {
      elapsedMs: this.clock() - this.startedAt,
      subrequests: this.subrequestCount,
      byKind: { ...this.byKind },
      openConnections: this.open,
      peakConnections: this.peak,
      openByKind: { ...this.openByKind },
    };
  }
}

const storage = new AsyncLocalStorage<InvocationUsage>();

/** Runs fn with `usage` as the current invocation's counter (AsyncLocalStorage; nodejs_compat is on). */
export function withUsage<T>(usage: InvocationUsage, fn: () => Promise<T>): Promise<T> {
  return storage.run(usage, fn);
}

export function currentUsage(): InvocationUsage | undefined {
  return storage.getStore();
}

/**
 * The body of `response`, passed through as is, calling `release` once when it is fully read,
 * cancelled or fails. The response is rebuilt around the new body; its url and redirected flag
 * (not part of ResponseInit) are carried over.
 */
function releasingOnBodyEnd(response: Response, release: () => void): Response {
  const reader = response.body!.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          release();
          controller.close();
        } else {
          controller.enqueue(value);
        }
      } catch (error) {
        release();
        controller.error(error);
      }
    },
    async cancel(reason) {
      release();
      await reader.cancel(reason);
    },
  });
  const wrapped = new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  Object.defineProperties(wrapped, {
    url: { value: response.url },
    redirected: { value: response.redirected },
  });
  return wrapped;
}

const INSTALLED = Symbol.for('starbase.usage.fetchCounting');

/** Wraps globalThis.fetch once per isolate: each call inside withUsage() counts one 'fetch'
 *  subrequest and holds one open connection until the response body is fully read, cancelled,
 *  or the request fails (a response with no body, or a 101 upgrade, releases at once). Calls
 *  outside withUsage() pass through untouched. Idempotent. */
export function installFetchCounting(): void {
  const global = globalThis as typeof globalThis & { [INSTALLED]?: true };
  if (global[INSTALLED]) return;
  const original = globalThis.fetch;
  const counted = async function fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    const usage = currentUsage();
    if (!usage) return original.call(globalThis, input, init);
    usage.countSubrequest('fetch');
    const release = usage.openConnection('fetch');
    let response: Response;
    try {
      response = await original.call(globalThis, input, init);
    } catch (error) {
      release();
      throw error;
    }
    if (response.body === null || response.status === 101) {
      release();
      return response;
    }
    return releasingOnBodyEnd(response, release);
  };
  globalThis.fetch = counted as typeof globalThis.fetch;
  global[INSTALLED] = true;
}
