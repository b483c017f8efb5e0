import { describe, expect, it } from 'vitest';
import { connectInWorker } from '../../functions/cloudflare-socket.ts';
import { InvocationUsage, currentUsage, installFetchCounting, withUsage, type UsageBudgets } from '../../functions/usage.ts';
import { DurableObjectLogRelay } from '../../functions/platform/build/adapters/build-log-relay.ts';
import { R2LogArchive } from '../../functions/platform/build/adapters/r2-log-archive.ts';
import { R2AccountLogObjects } from '../../functions/platform/cleanup/adapters/r2-account-logs.ts';
import { testEnv } from './support.ts';

const BUDGETS: UsageBudgets = { cpuMs: 25_000, subrequests: 9_000, connections: 6 };
const sandbox = testEnv.TEST_SANDBOX_URL;
const bindings = testEnv as unknown as { BUILD_LOGS: R2Bucket; BUILD_LOG_RELAY: DurableObjectNamespace };

installFetchCounting();

/** A clock the test moves by hand. */
function pinnedClock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

/** Polls until `check` holds: a socket settles on the runtime's own schedule after end(). */
async function eventually(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('budgets', () => {
  it('the cpu budget is spent at exactly its limit of elapsed time, not before', () => {
    const clock = pinnedClock();
    const usage = new InvocationUsage({ ...BUDGETS, cpuMs: 1000 }, clock.now);
    expect(usage.exhausted()).toBeNull();
    clock.advance(999);
    expect(usage.exhausted()).toBeNull();
    expect(usage.snapshot().elapsedMs).toBe(999);
    clock.advance(1);
    expect(usage.exhausted()).toEqual({ budget: 'cpu', used: 1000, limit: 1000 });
  });

  it('the subrequest budget is spent at its count, whatever the kinds', () => {
    const usage = new InvocationUsage({ ...BUDGETS, subrequests: 4 }, pinnedClock().now);
    usage.countSubrequest('fetch');
    usage.countSubrequest('socket');
    usage.countSubrequest('r2');
    expect(usage.exhausted()).toBeNull();
    usage.countSubrequest('durable-object');
    expect(usage.exhausted()).toEqual({ budget: 'subrequests', used: 4, limit: 4 });
    expect(usage.snapshot().byKind).toEqual({ fetch: 1, socket: 1, r2: 1, 'durable-object': 1 });
  });

  it('a connection is held until released, once however often it is released', () => {
    const usage = new InvocationUsage(BUDGETS, pinnedClock().now);
    const a = usage.openConnection('socket');
    const b = usage.openConnection('fetch');
    expect(usage.snapshot()).toMatchObject({ openConnections: 2, peakConnections: 2, subrequests: 0 });
    a();
    a();
    expect(usage.snapshot()).toMatchObject({ openConnections: 1, peakConnections: 2, openByKind: { socket: 0, fetch: 1 } });
    b();
    expect(usage.snapshot().openConnections).toBe(0);
  });

  it('refuses a budget that is not a positive number, naming it', () => {
    expect(() => new InvocationUsage({ ...BUDGETS, cpuMs: 0 })).toThrow(/budget cpuMs must be a positive number, got 0/);
    expect(() => new InvocationUsage({ ...BUDGETS, subrequests: Number.NaN })).toThrow(/budget subrequests must be a positive integer/);
    expect(() => new InvocationUsage({ ...BUDGETS, connections: 2.5 })).toThrow(/budget connections must be a positive integer, got 2.5/);
  });
});

describe('fetch counting', () => {
  it('counts one subrequest per fetch and holds a connection until its body is read', async () => {
    const usage = new InvocationUsage(BUDGETS);
    const responses = await withUsage(usage, () => Promise.all([1, 2, 3].map((i) => fetch(`${sandbox}/_usage/${i}`))));
    expect(usage.snapshot()).toMatchObject({ subrequests: 3, byKind: { fetch: 3 }, openConnections: 3, peakConnections: 3 });
    expect(responses.map((r) => r.url)).toEqual([1, 2, 3].map((i) => `${sandbox}/_usage/${i}`));
    await responses[0]!.text();
    expect(usage.snapshot().openConnections).toBe(2);
    await responses[1]!.arrayBuffer();
    await responses[2]!.body!.cancel();
    expect(usage.snapshot()).toMatchObject({ openConnections: 0, peakConnections: 3, subrequests: 3 });
  });

  it('releases at once for a response with no body, and on a failed request', async () => {
    const usage = new InvocationUsage(BUDGETS);
    const head = await withUsage(usage, () => fetch(`${sandbox}/_usage/head`, { method: 'HEAD' }));
    expect(head.body).toBeNull();
    // an aborted request fails like a refused one, without the runtime logging the refusal
    const aborted = withUsage(usage, () => fetch(`${sandbox}/_usage/aborted`, { signal: AbortSignal.abort() }));
    await expect(aborted).rejects.toThrow(/abort/i);
    expect(usage.snapshot()).toMatchObject({ subrequests: 2, openConnections: 0, peakConnections: 1 });
  });

  it('does not count a fetch outside withUsage', async () => {
    const usage = new InvocationUsage(BUDGETS);
    await withUsage(usage, async () => {});
    expect(currentUsage()).toBeUndefined();
    await (await fetch(`${sandbox}/_usage/outside`)).text();
    expect(usage.snapshot()).toMatchObject({ subrequests: 0, peakConnections: 0 });
  });

  it('installing twice wraps fetch once', async () => {
    installFetchCounting();
    const usage = new InvocationUsage(BUDGETS);
    await withUsage(usage, async () => (await fetch(`${sandbox}/_usage/twice`)).text());
    expect(usage.snapshot().subrequests).toBe(1);
  });

  it('two concurrent invocations count separately', async () => {
    const [a, b] = [new InvocationUsage(BUDGETS), new InvocationUsage(BUDGETS)];
    const fetchN = (n: number) => async () => {
      for (let i = 0; i < n; i++) {
        await (await fetch(`${sandbox}/_usage/c${i}`)).text();
        await new Promise((r) => setTimeout(r, 1));
      }
      return currentUsage();
    };
    const [seenA, seenB] = await Promise.all([withUsage(a, fetchN(2)), withUsage(b, fetchN(5))]);
    expect(seenA).toBe(a);
    expect(seenB).toBe(b);
    expect(a.snapshot()).toMatchObject({ subrequests: 2, openConnections: 0 });
    expect(b.snapshot()).toMatchObject({ subrequests: 5, openConnections: 0 });
  });
});

describe('platform calls', () => {
  it('a Postgres client counts one socket per connection and releases it when the client ends', async () => {
    const usage = new InvocationUsage(BUDGETS);
    await withUsage(usage, async () => {
      const sql = connectInWorker(testEnv.TEST_ADMIN_DATABASE_URL, { max: 1 });
      expect(await sql`select 1 as one`).toEqual([{ one: 1 }]);
      expect(usage.snapshot()).toMatchObject({ subrequests: 1, byKind: { socket: 1 }, openConnections: 1 });
      await sql.end();
    });
    await eventually(() => usage.snapshot().openConnections === 0);
    expect(usage.snapshot()).toMatchObject({ subrequests: 1, peakConnections: 1 });
  });

  it('each R2 operation and each Durable Object call counts one subrequest', async () => {
    const usage = new InvocationUsage(BUDGETS);
    const buildId = `usage-${crypto.randomUUID()}`;
    const line = (seq: number) => ({ seq, text: `line ${seq}`, at: new Date().toISOString() }) as never;
    await withUsage(usage, async () => {
      const archive = new R2LogArchive(bindings.BUILD_LOGS as never);
      await archive.append(buildId, [line(1)]); // get, put
      await archive.read(buildId); // get
      await new R2AccountLogObjects(null as never, bindings.BUILD_LOGS as never).delete([`builds/${buildId}.log`]);
      const relay = new DurableObjectLogRelay(bindings.BUILD_LOG_RELAY as never);
      await relay.publish(buildId, [line(1)]);
      await relay.end(buildId, 'succeeded' as never);
    });
    expect(usage.snapshot()).toMatchObject({ subrequests: 6, byKind: { r2: 4, 'durable-object': 2, fetch: 0, socket: 0 } });
  });
});
