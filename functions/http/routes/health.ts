import { createRoute, z } from '@hono/zod-openapi';
import { invocationOf } from '../context.ts';
import { createRouter, jsonAnswer, mount } from '../openapi.ts';

export const health = createRouter();

/** Liveness and database reachability; needs no token. */
mount(health, createRoute({
  method: 'get', path: '/healthz', tags: ['health'], summary: 'Liveness and database reachability (no token)',
  responses: {
    200: jsonAnswer(z.object({ ok: z.literal(true) }), 'the Worker runs and the database answers'),
    503: jsonAnswer(z.object({ ok: z.literal(false), error: z.object({ code: z.string(), message: z.string() }) }), 'the database is unreachable'),
  },
}), async (c) => {
  try {
    const inv = await invocationOf(c);
    await inv.sql`select 1`;
    return c.json({ ok: true });
  } catch {
    return c.json({ ok: false, error: { code: 'database_unreachable', message: 'the database is unreachable' } }, 503);
  }
});
