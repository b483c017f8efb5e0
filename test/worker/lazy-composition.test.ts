import { beforeAll, describe, expect, it } from 'vitest';
import { enqueue } from '../../queue/index.ts';
import { readConfig } from '../../functions/config.ts';
import { drain, openInvocation } from '../../functions/invocation.ts';
import { composeRegistry } from '../../functions/platform/compose.ts';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

/**
 * Issue 15, item 4: the composition root builds a type's adapters only when a step of that type
 * runs. Every platform setting is present here, and the key ring is one that cannot be opened:
 * a root that built eagerly would refuse every request on the way in.
 */
const BROKEN_PLATFORM = {
  DEPOT_TOKEN: 'depot-token-for-the-lazy-composition-test',
  DEPOT_PROJECT_ID: 'proj-lazy',
  DIGITALOCEAN_TOKEN: 'dop_v1_lazy_composition_test_token',
  ENCRYPTION_KEYS: 'k1:this-is-not-a-32-byte-key',
  TALOS_IMAGE: '171234567',
  STRIPE_SECRET_KEY: 'sk_test_lazy_composition',
};

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness(BROKEN_PLATFORM);
});

describe('the lazy composition root', () => {
  it('answers /healthz and an enqueue (and its kick) with a key ring that cannot be opened', async () => {
    const health = await h.request('/healthz', { token: null });
    expect(health.status).toBe(200);
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'uppercase', payload: { text: 'lazy' } } });
    expect(res.status).toBe(201);
    const { job } = (await res.json()) as { job: { id: string } };
    expect(await (await h.request(`/v1/jobs/${job.id}`)).json()).toMatchObject({ job: { status: 'done', result: { text: 'LAZY' } } });
  });

  it('declares every type without building one, and builds a type when its step first runs', async () => {
    const { registry, built } = await composeRegistry(h.env, readConfig(h.env).platform, h.sql);
    expect(registry.list().map((t) => t.type)).toEqual(['uppercase', 'countdown', 'fail', 'await_signal', 'build', 'provision_db', 'provision_cluster', 'billing_cron', 'invoice_account', 'cleanup']);
    await registry.sync(h.sql);
    expect(built).toEqual([]);
    // the key ring is parsed when the type is built: its error is the step's
    await expect(registry.get('provision_db')!.run({} as never)).rejects.toThrow(/encryption key #1/);
    await expect(registry.get('provision_cluster')!.run({} as never)).rejects.toThrow(/encryption key #1/);
    expect(built).toEqual(['provision_db', 'provision_cluster']);
  });

  it('an invocation that runs only a sample type builds no platform adapter', async () => {
    const inv = await openInvocation(h.env);
    try {
      await enqueue(inv.sql, { type: 'uppercase', payload: { text: 'x' } });
      const counts = await drain(inv, 2_000);
      expect(counts.done).toBeGreaterThanOrEqual(1);
      expect(inv.builtJobTypes).toEqual([]);
    } finally {
      await inv.close();
    }
  });
});
