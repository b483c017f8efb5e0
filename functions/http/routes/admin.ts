import { createRoute, z } from '@hono/zod-openapi';
import { readLeaderLease, releaseLeaderLease, rescueExpiredLeases } from '../../../queue/index.ts';
import { readConfig } from '../../config.ts';
import { dispatcherStatuses } from '../../dispatch/wake.ts';
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
