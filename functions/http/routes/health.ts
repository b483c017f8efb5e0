import { Hono } from 'hono';
import { invocationOf, type AppEnv } from '../context.ts';

export const health = new Hono<AppEnv>();

/** Liveness and database reachability; needs no token. */
health.get('/healthz', async (c) => {
  try {
    const inv = await invocationOf(c);
    await inv.sql`select 1`;
    return c.json({ ok: true });
  } catch {
    return c.json({ ok: false, error: { code: 'database_unreachable', message: 'the database is unreachable' } }, 503);
  }
});
