import { z } from 'zod';
import type { Sql } from '../../../queue/db.ts';
import { ConflictError, NotFoundError } from '../../../queue/errors.ts';
import { findActiveJobIdByCheckpoint } from '../../../queue/jobs-query.ts';
import { signalJob } from '../../../queue/signals.ts';
import { BUILD_JOB_TYPE, DEPOT_BUILD_FINISHED } from './build.ts';
import { depotSignatureProblem } from './depot-webhook-signature.ts';

/**
 * POST /webhooks/depot, minus the HTTP: verify the signature over the raw body, then wake the
 * build job following that Depot build. The event (Depot documents no build webhook, so this
 * shape is ours; docs/platform-jobs.md):
 *
 *   {"id": "<delivery id>", "type": "build.finished", "created": <unix seconds>,
 *    "data": {"projectId": "…", "buildId": "…", "status": "STATUS_SUCCESS" | "STATUS_FAILED" | …}}
 *
 * The event only wakes the job: its poll step reads the outcome from Depot's API (GetBuild) and
 * reads the log to its end, as every poll does. A signed payload proves who sent it, not that its
 * status is the build's last word, and the image ref and the final log lines come from the API
 * anyway; so a webhook can make a build finish sooner, never differently.
 *
 * Nothing is written unless a live build job checkpointed that build id: a build this Worker
 * does not follow (another project's, or one whose job already ended, say finished by polling)
 * is acknowledged with 200 and dropped, since the sender retries anything else and no retry can
 * make it ours, and a kept event for it would never be taken. For a live job the event goes to
 * that job alone (`signalJob`): its open wait takes it, or it is kept for the job's next wait.
 */

export type DepotWebhookOutcome = 'signalled' | 'kept' | 'ignored' | 'unknown_build' | 'ended';

export type DepotWebhookResult =
  | { status: 200; body: { received: true; deliveryId: string; type: string; outcome: DepotWebhookOutcome; buildJobId?: string } }
  | { status: 400; body: { error: string; code: 'bad_signature' | 'invalid_event'; field?: string } };

export interface DepotWebhookOptions {
  /** Our Depot project: an event about another project's build is ignored. */
  projectId?: string;
  /** When the request was received (tests pin it): the signature's age and the event's time. */
  now?: Date;
}

const depotEvent = z.object({
  id: z.string().min(1).max(200),
  type: z.string().min(1).max(200),
  created: z.number().int().nonnegative(),
  data: z.object({
    projectId: z.string().max(200).optional(),
    buildId: z.string().min(1).max(200),
    status: z.string().min(1).max(100),
  }),
});

/** The build ended: Depot's terminal statuses (depot.core.v1 Build.Status). */
const TERMINAL = new Set(['STATUS_SUCCESS', 'STATUS_FAILED', 'STATUS_ERROR', 'STATUS_CANCELED']);

function invalid(error: string, field?: string): DepotWebhookResult {
  return { status: 400, body: { error, code: 'invalid_event', ...(field ? { field } : {}) } };
}

function parseEvent(rawBody: string): z.infer<typeof depotEvent> | DepotWebhookResult {
  let json: unknown;
  try {
    json = JSON.parse(rawBody);
  } catch {
    return invalid('the event is not JSON');
  }
  const parsed = depotEvent.safeParse(json);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = issue.path.join('.');
  return invalid(field ? `${field}: ${issue.message}` : `the event must be a JSON object: ${issue.message}`, field || undefined);
}

export async function handleDepotWebhook(sql: Sql, rawBody: string, signatureHeader: string | null | undefined, secret: string, options: DepotWebhookOptions = {}): Promise<DepotWebhookResult> {
  const problem = await depotSignatureProblem(rawBody, signatureHeader, secret, options.now);
  if (problem) return { status: 400, body: { error: `Depot signature verification failed: ${problem}`, code: 'bad_signature' } };
  const event = parseEvent(rawBody);
  if ('status' in event) return event;
  const answer = (outcome: DepotWebhookOutcome, buildJobId?: string): DepotWebhookResult => ({
    status: 200,
    body: { received: true, deliveryId: event.id, type: event.type, outcome, ...(buildJobId ? { buildJobId } : {}) },
  });
  const { buildId, projectId, status } = event.data;
  if (event.type !== 'build.finished' || !TERMINAL.has(status)) return answer('ignored');
  if (options.projectId && projectId && projectId !== options.projectId) return answer('ignored');
  const jobId = await findActiveJobIdByCheckpoint(sql, BUILD_JOB_TYPE, { depot_build_id: buildId });
  if (!jobId) return answer('unknown_build');
  try {
    const signalled = await signalJob(sql, jobId, DEPOT_BUILD_FINISHED, { key: buildId, payload: { deliveryId: event.id, status }, now: options.now });
    return answer(signalled.delivered.length > 0 ? 'signalled' : 'kept', jobId);
  } catch (error) {
    // the job ended (or was pruned) between the lookup and the signal: nothing was written
    if (error instanceof ConflictError || error instanceof NotFoundError) return answer('ended', jobId);
    throw error;
  }
}
