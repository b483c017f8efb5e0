import { Hono } from 'hono';
import { readLeaderLease, releaseLeaderLease, rescueExpiredLeases } from '../../../queue/index.ts';
import { requireScope } from '../auth.ts';
import { invocationOf, type AppEnv } from '../context.ts';

export const admin = new Hono<AppEnv>();

admin.post('/v1/leader/release', requireScope('admin'), async (c) => {
  const inv = await invocationOf(c);
  const { previousHolder } = await releaseLeaderLease(inv.sql);
  return c.json({ released: true, previousHolder });
});

admin.get('/v1/leader', requireScope('admin', 'metrics'), async (c) => {
  const inv = await invocationOf(c);
  const lease = await readLeaderLease(inv.sql);
  return c.json({ holder: lease.holder, generation: lease.generation, acquiredAt: lease.acquiredAt, expiresAt: lease.expiresAt });
});

/** Force the rescue sweep now (normally the leader's tick runs it every minute). */
admin.post('/v1/maintenance/rescue', requireScope('admin'), async (c) => {
  const inv = await invocationOf(c);
  const counts = await rescueExpiredLeases(inv.sql);
  c.set('kick', counts.requeued > 0);
  return c.json(counts);
});
