import { dashboard } from './dashboard/index.tsx';
import { admin } from './http/routes/admin.ts';
import { builds } from './http/routes/builds.ts';
import { bulk } from './http/routes/bulk.ts';
import { methodsByPath } from './http/allow.ts';
import { errorBody, respondError } from './http/errors.ts';
import { createRouter, serveDocument } from './http/openapi.ts';
import { health } from './http/routes/health.ts';
import { jobs } from './http/routes/jobs.ts';
import { pauses } from './http/routes/pauses.ts';
import { rateLimits } from './http/routes/rate-limits.ts';
import { signals } from './http/routes/signals.ts';
import { metrics } from './http/routes/metrics.ts';
import { provisioning } from './http/routes/provisioning.ts';
import { webhooks } from './http/routes/webhooks.ts';
import { nextDueInMs } from '../queue/index.ts';
import { drain, type Invocation } from './invocation.ts';
import { PRIMARY_SHARD } from './dispatch/names.ts';
import { wakeDispatcher } from './dispatch/wake.ts';

/** Methods that may make work due: every write. A read never wakes anyone. */
const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The HTTP API. Each request's database client is opened on first use and closed after the
 * response in waitUntil. When the request enqueued work it first drains what is due now on its
 * own connection (the kick), so a new job starts within milliseconds; then a write that
 * succeeded wakes the pool's dispatcher (whatever it made due — an enqueue, a debounced push, a
 * resume, a retry — its alarm is set for the next due step, read on the request's connection).
 */
export function createApp() {
  const app = createRouter();

  app.use('*', async (c, next) => {
    try {
      await next();
    } finally {
      const opened = c.get('invocation');
      if (opened) {
        // 3xx too: a dashboard action answers with a redirect back to its page
        const ok = c.res.status < 400;
        const kick = c.get('kick') === true && ok;
        const wake = WRITES.has(c.req.method) && ok;
        c.executionCtx.waitUntil(
          (async () => {
            const inv = await opened.catch(() => null);
            if (!inv) return;
            try {
              // the kick first: what it made due now runs on this connection, and a burst of
              // enqueues is drained by their kicks without also waking shards to compete for the
              // same steps; the wake-up after it hands the dispatcher whatever is due later or left
              if (kick) await drain(inv, inv.config.kickBudgetMs);
              if (wake) await wakePool(inv);
            } catch (error) {
              inv.log({ level: 'error', msg: 'kick drain failed', error: (error as Error).message });
            } finally {
              await inv.close();
            }
          })(),
        );
      }
    }
  });

  // Every answer (API, errors, the dashboard, redirects): the browser must not sniff a type other
  // than the one declared (a build log holding HTML served as text/plain stays text), and no
  // cache — shared or the browser's — keeps a copy of jobs, payloads, logs or pages. A route that
  // sets its own Cache-Control keeps it. A WebSocket upgrade (101) is passed on untouched.
  app.use('*', async (c, next) => {
    await next();
    if (c.res.status === 101) return;
    const missing = c.res.headers.get('x-content-type-options') !== 'nosniff' || !c.res.headers.has('cache-control');
    if (!missing) return;
    // a response passed on from a fetch() (a Durable Object's) has immutable headers: copy it
    const res = new Response(c.res.body, c.res);
    res.headers.set('x-content-type-options', 'nosniff');
    if (!res.headers.has('cache-control')) res.headers.set('cache-control', 'no-store');
    c.res = undefined;
    c.res = res;
  });

  // Answers are not scrubbed by value: what the system produced (step errors, provider answers,
  // log lines, alerts) is scrubbed before it is stored, and what a caller sent is shown as sent.
  // Scrubbing answers made the scrubber an oracle: a payload holding a secret's exact value came
  // back `[redacted]`, a near miss unchanged.

  app.route('/', health);
  app.route('/', bulk); // before jobs: /v1/jobs/bulk/retry is no job's retry
  app.route('/', jobs);
  app.route('/', signals);
  app.route('/', pauses);
  app.route('/', rateLimits);
  app.route('/', admin);
  app.route('/', builds);
  app.route('/', provisioning);
  app.route('/', webhooks);
  app.route('/', metrics);
  app.route('/', dashboard);
  // the public contract: no token, no secret in it (the routes' own schemas, see http/openapi.ts)
  serveDocument(app);
  const methodsOf = methodsByPath(app.routes);
  app.notFound((c) => {
    const allowed = methodsOf(c.req.path);
    if (!allowed) return c.json(errorBody('not_found', `no route ${c.req.method} ${c.req.path}`), 404);
    c.header('Allow', allowed.join(', '));
    return c.json(errorBody('method_not_allowed', `${c.req.method} is not allowed on ${c.req.path}: use ${allowed.join(', ')}`), 405);
  });
  app.onError((error, c) => respondError(c, error));
  return app;
}

/**
 * Wakes the pool's shard 0 for the next due step, read on this request's open connection: one
 * query here instead of a Durable Object call and an alarm when nothing waits (the kick drained
 * it all, or the write made nothing due), and an alarm set for the step's own time when it is
 * later (a debounced push, a runAt, a reschedule).
 */
async function wakePool(inv: Invocation): Promise<void> {
  if (inv.config.dispatchShards === 0) return;
  try {
    const dueIn = await nextDueInMs(inv.sql, inv.config.pool);
    if (dueIn === null) return;
    await wakeDispatcher(inv.env, { pool: inv.config.pool, shard: PRIMARY_SHARD, at: Date.now() + Math.max(0, dueIn) });
  } catch (error) {
    // the tick re-arms a dispatcher it finds unarmed, and shard 0's idle poll finds the work meanwhile
    inv.log({ level: 'warn', msg: 'waking the dispatcher failed', error: (error as Error).message });
  }
}
