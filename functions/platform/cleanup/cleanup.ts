import { z } from 'zod';
import { PermanentError } from '../../../queue/errors.ts';
import { defineJobType, done, next, type JobType, type StepContext } from '../../../queue/registry.ts';
import { parseCheckpoint } from '../checkpoint.ts';
import { DIGITALOCEAN_RATE_LIMIT } from '../provisioning/job-type.ts';
import type { CleanupDeps, SweepContext, SweepOutcome } from './sweep.ts';
import { sweepPurgeCancelled, sweepSuspendUnpaid } from './sweep-accounts.ts';
import { sweepOrphanedResources } from './sweep-resources.ts';

/**
 * cleanup: the sweeps the cleanup Cron Trigger runs (every 15 minutes).
 *
 *   orphaned_resources  cloud resources tagged as ours whose tags no live owning row claims
 *                       (a row is not live once destroyed, or once its provisioning job ended
 *                       failed, oom_killed or cancelled), older than a grace period (a provisioning step writes its row right
 *                       after the provider call; the grace covers that window) → deleted
 *   suspend_unpaid      accounts in payment_failed for longer than a grace period → account
 *                       `suspended`, its services' desired state `suspended: true`
 *   purge_cancelled     accounts cancelled more than 30 days ago, whose last month has been
 *                       billed → their databases and clusters (at the provider), log objects
 *                       and rows deleted; the account row, its plans and invoices stay as the
 *                       financial record, marked data_purged_at
 *
 * Each step runs one bounded batch of one sweep and continues with the same sweep while work is
 * left, then the next sweep. Every sweep is idempotent (it selects only what still needs doing;
 * deleting what is gone is not an error), so an overlapping or repeated run is harmless. Every
 * action is written to platform.cleanup_actions (with the job id) as it is taken, and listed in
 * the job's result. A dry run lists the first batch of each sweep and changes nothing.
 */

export const CLEANUP = 'cleanup';
export const SWEEPS = ['orphaned_resources', 'suspend_unpaid', 'purge_cancelled'] as const;
export type Sweep = (typeof SWEEPS)[number];

export const cleanupPayload = z.object({ sweep: z.enum(SWEEPS).optional(), dryRun: z.boolean().optional() });
export type CleanupPayload = z.infer<typeof cleanupPayload>;

export type { AccountLogObjects } from './ports/account-log-objects.ts';
export type { CloudInventory, CloudResource } from './ports/cloud-inventory.ts';
export type { CleanupAction, CleanupDeps, ResourceOwnerTable } from './sweep.ts';

const MAX_LISTED_ACTIONS = 200;

const SWEEP_FUNCTIONS: Record<Sweep, (c: SweepContext, deps: CleanupDeps) => Promise<SweepOutcome>> = {
  orphaned_resources: sweepOrphanedResources,
  suspend_unpaid: sweepSuspendUnpaid,
  purge_cancelled: sweepPurgeCancelled,
};

const cleanupAction = z.object({ action: z.string(), target: z.string(), detail: z.record(z.string(), z.json()).optional() });

/** Per sweep so far: how many actions, the first MAX_LISTED_ACTIONS of them, how many were left out. */
const sweepTally = z.object({ count: z.number().int().min(0), actions: z.array(cleanupAction), omitted: z.number().int().min(0) });
type SweepTally = z.infer<typeof sweepTally>;
const cleanupCheckpoint = z.looseObject({ sweeps: z.partialRecord(z.enum(SWEEPS), sweepTally).optional() });

export function cleanupJob(deps: CleanupDeps): JobType<CleanupPayload> {
  const batch = Math.max(1, deps.batchSize ?? 100);
  return defineJobType({
    type: CLEANUP,
    enqueueVia: 'its schedule (every 15 minutes)',
    payload: cleanupPayload,
    leaseMs: 300_000,
    maxAttempts: 3,
    // The orphan sweep lists and deletes on DigitalOcean with the provisioning types' token: its
    // 429 (CloudRateLimitError, marked rateLimited) pauses their shared key, not just this job.
    rateLimit: DIGITALOCEAN_RATE_LIMIT,
    async run(ctx: StepContext<CleanupPayload>) {
      const { sql, payload, job } = ctx;
      const dryRun = payload.dryRun === true;
      const plan: readonly Sweep[] = payload.sweep ? [payload.sweep] : SWEEPS;
      const step = ctx.step === 'start' ? plan[0] : ctx.step;
      const sweep = plan.find((name) => name === step);
      if (!sweep) throw new PermanentError(`cleanup has no sweep "${ctx.step}"`);
      const now = ctx.now();
      const c: SweepContext = {
        sql,
        now,
        dryRun,
        batch,
        async act(action, perform) {
          if (dryRun) return;
          await perform?.();
          await sql`
            insert into platform.cleanup_actions (job_id, sweep, action, target, detail, at)
            values (${job.id}, ${sweep}, ${action.action}, ${action.target}, ${sql.json(action.detail ?? {})}, ${now})`;
        },
      };
      const outcome = await SWEEP_FUNCTIONS[sweep](c, deps);

      const tallies: Partial<Record<Sweep, SweepTally>> = { ...parseCheckpoint(CLEANUP, cleanupCheckpoint, ctx.checkpoint).sweeps };
      const tally = tallies[sweep] ?? { count: 0, actions: [], omitted: 0 };
      const room = Math.max(0, MAX_LISTED_ACTIONS - tally.actions.length);
      tallies[sweep] = {
        count: tally.count + outcome.actions.length,
        actions: [...tally.actions, ...outcome.actions.slice(0, room)],
        omitted: tally.omitted + Math.max(0, outcome.actions.length - room),
      };
      const checkpoint = { sweeps: tallies };
      // A dry run changes nothing, so another batch would list the same things again.
      if (outcome.more && !dryRun) return next(sweep, { checkpoint, delayMs: 0 });
      const following = plan[plan.indexOf(sweep) + 1];
      if (following) return next(following, { checkpoint, delayMs: 0 });
      // An array: jsonb does not keep an object's key order, and the order sweeps ran in matters.
      return done({ dryRun, sweeps: plan.map((name) => ({ sweep: name, ...tallies[name] })) });
    },
  });
}
