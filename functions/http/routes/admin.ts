import { createRoute, z } from '@hono/zod-openapi';
import { readLeaderLease, releaseLeaderLease, rescueExpiredLeases } from '../../../queue/index.ts';
import { readConfig } from '../../config.ts';
import { dispatcherStatuses } from '../../dispatch/wake.ts';
import { runTick } from '../../tick.ts';
import { requireScope } from '../auth.ts';
import { invocationOf } from '../context.ts';
import { AUTH_ERRORS, bearer, createRouter, errorAnswers, jsonAnswer, mount } from '../openapi.ts';

export const admin = createRouter();

const time = z.string().openapi({ format: 'date-time' });

mount(admin, createRoute({
  method: 'post', path: '/v1/leader/release', tags: ['operator'], security: bearer,
  summary: 'Release the leader lease (the next tick elects a leader)',
  middleware: [requireScope('admin')],
  responses: { 200: jsonAnswer(z.object({ released: z.literal(true), previousHolder: z.string().nullable() }), 'released'), ...errorAnswers(...AUTH_ERRORS) },
}), async (c) => {
  const inv = await invocationOf(c);
  const { previousHolder } = await releaseLeaderLease(inv.sql);
  return c.json({ released: true, previousHolder });
});

mount(admin, createRoute({
  method: 'get', path: '/v1/leader', tags: ['operator'], security: bearer,
  summary: 'The leader lease',
  middleware: [requireScope('admin', 'metrics')],
  responses: {
    200: jsonAnswer(z.object({ holder: z.string().nullable(), generation: z.number().int(), acquiredAt: time.nullable(), expiresAt: time.nullable() }), 'the lease'),
    ...errorAnswers(...AUTH_ERRORS),
  },
}), async (c) => {
  const inv = await invocationOf(c);
  const lease = await readLeaderLease(inv.sql);
  return c.json({ holder: lease.holder, generation: lease.generation, acquiredAt: lease.acquiredAt, expiresAt: lease.expiresAt });
});

/** Force the rescue sweep now (normally the leader's tick runs it every minute). */
mount(admin, createRoute({
  method: 'post', path: '/v1/maintenance/rescue', tags: ['operator'], security: bearer,
  summary: 'Run the expired-lease rescue sweep now',
  middleware: [requireScope('admin')],
  responses: { 200: jsonAnswer(z.record(z.string(), z.number().int()).openapi({ description: 'counts by outcome (requeued, failed, …)' }), 'the counts'), ...errorAnswers(...AUTH_ERRORS) },
}), async (c) => {
  const inv = await invocationOf(c);
  const counts = await rescueExpiredLeases(inv.sql);
  c.set('kick', counts.requeued > 0);
  return c.json(counts);
});

const stepCounts = z.object({
  claimed: z.number().int(), done: z.number().int(), continued: z.number().int(), retried: z.number().int(),
  failed: z.number().int(), cancelled: z.number().int(), lost: z.number().int(), released: z.number().int(),
});

/**
 * Run the tick now, as the per-minute Cron Trigger runs it: take or renew the leader lease, run the
 * leader's maintenance, re-arm the dispatcher, drain for TICK_BUDGET_MS. The operator's "trigger the
 * dispatcher" (docs/manual.md): overlapping a Cron Trigger's tick is safe, as two ticks are.
 */
mount(admin, createRoute({
  method: 'post', path: '/v1/tick', tags: ['operator'], security: bearer,
  summary: 'Run the tick now (leader lease, maintenance, dispatcher, drain), as the Cron Trigger does',
  middleware: [requireScope('admin')],
  responses: {
    200: jsonAnswer(z.object({
      leader: z.object({ outcome: z.string(), holder: z.string().nullable(), generation: z.number().int() }),
      maintenance: z.record(z.string(), z.unknown()).nullable().openapi({ description: "each pass's result; null when this tick did not hold the leader lease" }),
      failed: z.array(z.string()).openapi({ description: 'the maintenance passes that threw (each alerted as maintenance_failed)' }),
      dispatcher: z.enum(['armed', 'rearmed', 'off', 'unavailable']),
      steps: stepCounts,
    }), 'what the tick did'),
    ...errorAnswers(...AUTH_ERRORS),
  },
}), async (c) => {
  const inv = await invocationOf(c);
  const result = await runTick(inv, new Date());
  const { leader } = result;
  inv.log({ level: 'info', msg: 'tick', trigger: 'POST /v1/tick', leader: leader.outcome, generation: leader.generation, maintenance: result.maintenance, dispatcher: result.dispatcher, steps: result.steps });
  return c.json({
    leader: { outcome: leader.outcome, holder: leader.holder, generation: leader.generation },
    maintenance: (result.maintenance as Record<string, unknown> | null) ?? null,
    failed: result.failed,
    dispatcher: result.dispatcher,
    steps: result.steps,
  });
});

const alarmReport = z.object({
  claimed: z.number().int(),
  stoppedBy: z.enum(['drained', 'blocked', 'cpu', 'subrequests', 'error']).openapi({ description: 'drained: nothing more due; blocked: due steps none could claim; cpu / subrequests: stopped before that per-invocation limit; error: the alarm failed' }),
  woke: z.array(z.number().int()).openapi({ description: 'the shards this alarm woke for a burst' }),
  nextAt: time.nullable(),
  error: z.string().optional(),
});

const dispatcherSchema = z.object({
  pool: z.string(),
  shard: z.number().int(),
  alarmAt: time.nullable().openapi({ description: 'when its alarm is set for; null: not armed' }),
  alarms: z.number().int(),
  idlePolls: z.number().int().openapi({ description: 'alarms that found nothing due' }),
  claimed: z.number().int(),
  failures: z.number().int(),
  lastAlarmAt: time.nullable(),
  last: alarmReport.nullable(),
});

/** The pool's clock: each dispatcher shard's alarm and what its alarms did (docs/clock.md). */
mount(admin, createRoute({
  method: 'get', path: '/v1/dispatchers', tags: ['operator'], security: bearer,
  summary: "This pool's dispatchers: when each alarm is set for and what the last one did",
  middleware: [requireScope('admin', 'metrics')],
  responses: {
    200: jsonAnswer(z.object({ pool: z.string(), shards: z.array(dispatcherSchema) }), 'one entry per shard (none when DISPATCH_SHARDS is 0)'),
    ...errorAnswers(...AUTH_ERRORS),
  },
}), async (c) => {
  const config = readConfig(c.env);
  return c.json({ pool: config.pool, shards: await dispatcherStatuses(c.env, config.pool, config.dispatchShards) });
});
