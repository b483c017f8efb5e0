import { z } from 'zod';
import { PermanentError } from '../../../queue/errors.ts';
import type { JsonObject } from '../../../queue/job.ts';
import { parseCheckpoint } from '../checkpoint.ts';
import { defineJobType, done, next, waitFor, type JobType, type StepContext, type StepResult } from '../../../queue/registry.ts';
import { buildRequestKey, type BuildRequest, type BuildService, type LogCursor } from './ports/build-service.ts';
import type { LogArchive } from './ports/log-archive.ts';
import type { BuildOutcome, LogRelay } from './ports/log-relay.ts';
import { assertOwnership, OwnershipError } from '../../lib/tenancy.ts';

/**
 * The `build` job: submit a service's commit to the build service, follow it to the end while
 * relaying its log live and archiving it, then set the service's desired image.
 *
 *   start (= submit) → poll … poll → finish
 *
 * With Depot's webhook on (`awaitWebhook`), the time between polls is a wait for the event
 * `depot_build_finished` keyed by the Depot build id, timing out after the poll interval: the
 * webhook (POST /webhooks/depot) wakes the job at once, and without one it polls as before. The
 * poll it wakes reads the status and the rest of the log from Depot like any poll.
 *
 * Checkpoint: `depot_build_id` and `request_key` (from submit), `log_cursor` (how far the log was
 * archived and relayed), `webhook_wakes` (polls a webhook started), `image_ref` and `built_at`
 * (when the build succeeded), `build_failure` (when it failed or was cancelled at Depot).
 */

export const buildPayload = z.object({
  /** The account pushing: it must own the service (checked by the route and again by the steps). */
  accountId: z.string().min(1).max(200),
  serviceId: z.string().min(1).max(200),
  branch: z.string().min(1).max(255).regex(/^[^\u0000-\u001f\u007f]+$/, 'must not contain control characters'),
  commitSha: z.string().regex(/^[0-9a-f]{7,64}$/i, 'must be a hex commit id'),
});
export type BuildPayload = z.infer<typeof buildPayload>;

export interface BuildJobDeps {
  buildService: BuildService;
  logRelay: LogRelay;
  logArchive: LogArchive;
  /** Between polls of a running build; default 2 s (viewers see lines within one interval). */
  pollIntervalMs?: number;
  /**
   * Depot's build-finished webhook is set up (DEPOT_WEBHOOK_SECRET): between polls the job waits
   * for it instead of sleeping. Off: plain delayed polls (no wait rows, no timed-out waits).
   */
  awaitWebhook?: boolean;
  /**
   * Between polls while waiting for the webhook; default `pollIntervalMs`. The webhook ends the
   * wait when the build finishes, so polls are then only for the live log (and the fallback): a
   * longer interval makes fewer polls, and live viewers see lines up to that much later.
   */
  webhookPollIntervalMs?: number;
  /** A build still running this long after submit is cancelled and the job fails; default 1 h. */
  buildTimeoutMs?: number;
  /**
   * Removes the deployment's secret values from the build's log lines before they are archived
   * or relayed (a build's output can print a token it was given); identity by default.
   */
  scrub?: (text: string) => string;
}

export const BUILD_JOB_TYPE = 'build';
/** Kept equal to the row migrations/0010_build.sql inserts (the registry sync would rewrite it otherwise). */
export const BUILD_LEASE_MS = 120_000;
export const BUILD_MAX_ATTEMPTS = 8;
/** The event POST /webhooks/depot sends a build job, keyed by the Depot build id. */
export const DEPOT_BUILD_FINISHED = 'depot_build_finished';

type Ctx = StepContext<BuildPayload>;

function requestOf(ctx: Ctx): BuildRequest {
  const { serviceId, branch, commitSha } = ctx.payload;
  return { serviceId, branch, commitSha, requestKey: buildRequestKey(ctx.job.id) };
}

/**
 * The pushing account must exist and own the service, whatever path enqueued the job (the push
 * route checks too, but POST /v1/jobs and SQL reach this step without it): a PermanentError,
 * since retrying cannot change who owns the service.
 */
async function assertPusherOwns(ctx: Ctx): Promise<void> {
  try {
    await assertOwnership(ctx.sql, ctx.payload.accountId, ctx.payload.serviceId);
  } catch (error) {
    if (error instanceof OwnershipError) throw new PermanentError(`build refused: ${error.message}`);
    throw error;
  }
}

function buildIdOf(checkpoint: JsonObject): string | null {
  return typeof checkpoint.depot_build_id === 'string' ? checkpoint.depot_build_id : null;
}

/** A poll's checkpoint: where the log was read up to (none before the first page). */
const pollCheckpoint = z.looseObject({
  log_cursor: z.object({ lastSeq: z.number(), position: z.string() }).nullish(),
  relay_failures: z.number().int().min(0).optional(),
  submitted_at: z.string().optional(),
  webhook_wakes: z.number().int().min(0).optional(),
});

/** What `finish` needs: the image the last poll saw built, or how the build failed. */
const finishCheckpoint = z.looseObject({
  depot_build_id: z.string(),
  image_ref: z.string().optional(),
  built_at: z.string().optional(),
  build_failure: z.object({ outcome: z.enum(['failed', 'cancelled']), error: z.string() }).optional(),
});

/**
 * Until the next poll: with the webhook on, a wait for it that times out at the poll interval
 * (an event sent while no wait was open is kept for this one and ends it at once).
 */
function untilNextPoll(deps: Settled, buildId: string, checkpoint: JsonObject): StepResult {
  if (!deps.awaitWebhook || deps.webhookPollIntervalMs < 1) return next('poll', { checkpoint, delayMs: deps.pollIntervalMs });
  return waitFor(DEPOT_BUILD_FINISHED, { key: buildId, timeoutMs: deps.webhookPollIntervalMs, step: 'poll', checkpoint });
}

/**
 * The build ended: on to `finish`, through a wait of 1 ms when the webhook is on. A webhook that
 * came while this poll ran was kept for the job; the wait takes it now, so a build's end leaves
 * no kept event behind (only one arriving during the finish step itself can be left, for the
 * signal rows' pruning).
 */
function toFinish(deps: Settled, buildId: string, checkpoint: JsonObject): StepResult {
  if (!deps.awaitWebhook) return next('finish', { checkpoint, delayMs: 0 });
  return waitFor(DEPOT_BUILD_FINISHED, { key: buildId, timeoutMs: 1, step: 'finish', checkpoint });
}

/**
 * The provider may have accepted a build whose id never reached the checkpoint (the step died
 * between the two). The request key is derived from the job id, so looking it up first finds
 * that build, and the job adopts it instead of starting a second one.
 */
async function submit(deps: Settled, ctx: Ctx): Promise<StepResult> {
  if (buildIdOf(ctx.checkpoint)) return next('poll', { delayMs: 0 });
  await assertPusherOwns(ctx);
  const request = requestOf(ctx);
  const found = await deps.buildService.findByRequestKey(request, { signal: ctx.signal });
  const { buildId } = found ?? (await deps.buildService.submit(request, { signal: ctx.signal }));
  return untilNextPoll(deps, buildId, { depot_build_id: buildId, request_key: request.requestKey, submitted_at: ctx.now().toISOString(), adopted: found !== null });
}

/**
 * Status first, then logs: when the status read says the build ended, the log read after it is
 * complete. Lines are archived before the cursor is checkpointed, so a step that dies after
 * archiving re-reads lines the archive already holds (it skips them by sequence number) and
 * never skips a line. Relaying is best effort: the archive is the record, and a viewer that missed
 * a line reads it there.
 */
async function poll(deps: Settled, ctx: Ctx): Promise<StepResult> {
  const buildId = buildIdOf(ctx.checkpoint);
  if (!buildId) throw new PermanentError('poll step without a depot_build_id in the checkpoint');
  const cp = parseCheckpoint(BUILD_JOB_TYPE, pollCheckpoint, ctx.checkpoint);
  const status = await deps.buildService.status(buildId, { signal: ctx.signal });
  const page = await deps.buildService.readLogs(buildId, cp.log_cursor ?? null, { final: status.state !== 'running', signal: ctx.signal });
  const checkpoint: JsonObject = { log_cursor: { lastSeq: page.cursor.lastSeq, position: page.cursor.position } };
  if (ctx.event?.outcome === 'signalled') checkpoint.webhook_wakes = (cp.webhook_wakes ?? 0) + 1;
  if (page.lines.length > 0) {
    const lines = page.lines.map((line) => ({ ...line, text: deps.scrub(line.text) }));
    await deps.logArchive.append(ctx.job.id, lines);
    try {
      await deps.logRelay.publish(ctx.job.id, lines);
    } catch {
      checkpoint.relay_failures = (cp.relay_failures ?? 0) + 1;
    }
  }
  if (page.more) return next('poll', { checkpoint, delayMs: 0 });
  switch (status.state) {
    case 'running': {
      const submittedAt = Date.parse(String(cp.submitted_at));
      if (ctx.now().getTime() - submittedAt > deps.buildTimeoutMs) {
        await deps.buildService.cancel(buildId, `build job ${ctx.job.id} timed out after ${deps.buildTimeoutMs} ms`, { signal: ctx.signal });
        throw new PermanentError(`build ${buildId} was still running ${deps.buildTimeoutMs} ms after submit; cancelled it`);
      }
      return untilNextPoll(deps, buildId, checkpoint);
    }
    case 'succeeded':
      return toFinish(deps, buildId, { ...checkpoint, image_ref: status.imageRef, built_at: ctx.now().toISOString() });
    case 'failed':
      return toFinish(deps, buildId, { ...checkpoint, build_failure: { outcome: 'failed', error: `build ${buildId} failed: ${status.error}` } });
    case 'cancelled':
      return toFinish(deps, buildId, { ...checkpoint, build_failure: { outcome: 'cancelled', error: `build ${buildId} was cancelled at the build service` } });
  }
}

/**
 * The desired image is written by the settle effect: it commits iff the job completes. Only an
 * existing service of the pushing account is updated: a service deleted (or handed to another
 * account) while it built fails the job here, and the effect updates rather than upserts, so it
 * can never create a service; it re-checks the owner in its own statement, since the settle
 * runs in another transaction than the check.
 */
async function finish(deps: Settled, ctx: Ctx): Promise<StepResult> {
  const cp = parseCheckpoint(BUILD_JOB_TYPE, finishCheckpoint, ctx.checkpoint);
  if (cp.build_failure) {
    // A failed build fails the job with the build's error and changes no desired state.
    await endRelay(deps, ctx, cp.build_failure.outcome);
    throw new PermanentError(cp.build_failure.error);
  }
  const { image_ref: ref, built_at: builtAt, depot_build_id: depotBuildId } = cp;
  if (!ref || !builtAt) throw new PermanentError('finish step without an image_ref in the checkpoint');
  const image = { ref, commitSha: ctx.payload.commitSha, branch: ctx.payload.branch, buildId: ctx.job.id, depotBuildId, builtAt };
  await assertPusherOwns(ctx);
  await endRelay(deps, ctx, 'succeeded');
  const now = ctx.now();
  const { serviceId, accountId } = ctx.payload;
  return done({ serviceId, image }, async (tx) => {
    // Between the check and this settle the service may have gone: then nothing is written
    // (the image of a service that no longer exists has nowhere to go).
    await tx`
      update platform.services
         set desired_state = desired_state || jsonb_build_object('image', ${tx.json(image)}::jsonb),
             updated_at = ${now}
       where id = ${serviceId} and account_id = ${accountId}`;
  });
}

/** Tell live viewers the build ended; best effort, like every relay call (the archive is the record). */
async function endRelay(deps: Settled, ctx: Ctx, outcome: BuildOutcome): Promise<void> {
  await deps.logRelay.end?.(ctx.job.id, outcome).catch(() => {});
}

/** The build this job started, from the checkpoint or (if the id never reached it) by its request key. */
async function startedBuild(deps: Settled, ctx: Ctx): Promise<string | null> {
  return buildIdOf(ctx.checkpoint) ?? (await deps.buildService.findByRequestKey(requestOf(ctx), { signal: ctx.signal }))?.buildId ?? null;
}

/** The deps with their defaults, as the steps below use them. */
function settle(deps: BuildJobDeps) {
  return {
    ...deps,
    pollIntervalMs: deps.pollIntervalMs ?? 2000,
    awaitWebhook: deps.awaitWebhook ?? false,
    webhookPollIntervalMs: deps.webhookPollIntervalMs ?? deps.pollIntervalMs ?? 2000,
    buildTimeoutMs: deps.buildTimeoutMs ?? 60 * 60_000,
    scrub: deps.scrub ?? ((text: string) => text),
  };
}
type Settled = ReturnType<typeof settle>;

export function buildJobType(given: BuildJobDeps): JobType<BuildPayload> {
  const deps = settle(given);
  return defineJobType<BuildPayload>({
    type: BUILD_JOB_TYPE,
    enqueueVia: 'POST /v1/pushes',
    payload: buildPayload,
    leaseMs: BUILD_LEASE_MS,
    maxAttempts: BUILD_MAX_ATTEMPTS,
    // Depot outages: about 3 minutes of backoff before the job gives up.
    retry: { baseMs: 2000, maxMs: 60_000 },
    async run(ctx) {
      switch (ctx.step) {
        case 'start':
        case 'submit':
          return submit(deps, ctx);
        case 'poll':
          return poll(deps, ctx);
        case 'finish':
          return finish(deps, ctx);
        default:
          throw new PermanentError(`build job has no step "${ctx.step}"`);
      }
    },
    async onCancel(ctx) {
      const buildId = await startedBuild(deps, ctx);
      if (buildId) await deps.buildService.cancel(buildId, `build job ${ctx.job.id} cancelled: ${ctx.job.cancelReason ?? 'no reason given'}`, { signal: ctx.signal });
      await endRelay(deps, ctx, 'cancelled');
    },
    // A job that gave up (e.g. the provider stayed unreachable) must not leave its build running.
    async onFailed(ctx) {
      const buildId = await startedBuild(deps, ctx);
      if (buildId && (await deps.buildService.status(buildId)).state === 'running') {
        await deps.buildService.cancel(buildId, `build job ${ctx.job.id} failed`);
      }
    },
  });
}
