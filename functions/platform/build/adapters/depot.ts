/**
 * BuildService over Depot's API (Connect protocol, JSON encoding, plain `fetch`).
 *
 * Definitions used (field names are the proto3 JSON names of these messages):
 * - depot.build.v1.BuildService (depot/proto `proto/depot/build/v1/build.proto`, as generated in
 *   depot/sdk-node `src/gen/depot/build/v1/build_pb.ts`):
 *   CreateBuild {projectId} → {buildId, buildToken};
 *   FinishBuild {buildId, success: {} | error: {error}} → {};
 *   GetBuildSteps {projectId, buildId, pageSize, pageToken} →
 *     {buildSteps: [{name, digest, startedAt, completedAt, cacheState, error, hasLogs}], nextPageToken};
 *   GetBuildStepLogs {projectId, buildId, buildStepDigest, pageSize, pageToken} →
 *     {logs: [{message, timestamp}], nextPageToken}.
 * - depot.core.v1.BuildService (depot/sdk-node `src/gen/depot/core/v1/build_pb.ts`):
 *   GetBuild {buildId} → {build: {buildId, status: STATUS_RUNNING | STATUS_FAILED | STATUS_SUCCESS |
 *   STATUS_ERROR | STATUS_CANCELED, createdAt, startedAt, finishedAt, …}};
 *   ListBuilds {projectId, pageSize, pageToken} → {builds: [Build], nextPageToken}.
 * - The image of a build is Depot Registry's `registry.depot.dev/<projectId>:<buildId>` (`--save`).
 *
 * Beyond the published messages: Depot has no field for a client-supplied key or for what is being
 * built. The adapter sends the request key as an `Idempotency-Key` header and the service, branch
 * and commit as `X-Starbase-*` headers on CreateBuild (headers, because an unknown JSON field may be
 * rejected where an unknown header never is), and finds the key again in ListBuilds, where a provider
 * that keeps it answers it as `Build.requestKey` (the sandbox does). Against a provider that drops
 * it, `findByRequestKey` finds nothing and the submit/checkpoint crash window can leave one extra
 * build behind.
 *
 * Cancel: Depot has no cancel RPC; a build is ended with FinishBuild carrying an error.
 */
import { z } from 'zod';
import { PermanentError } from '../../../../queue/errors.ts';
import type { BuildRequest, BuildService, BuildStatus, LogCursor, LogLine, LogPage, ReadLogsOptions } from '../ports/build-service.ts';

export interface DepotConfig {
  /** e.g. https://api.depot.dev, or the sandbox's URL. */
  baseUrl: string;
  /** An organization API token; sent only in the Authorization header. */
  token: string;
  /** The Depot project builds run in (one cache). */
  projectId: string;
  /** Where `--save`d images live; default registry.depot.dev. */
  registry?: string;
  /** Per request; default 15 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** Lines returned by one readLogs call at most (default 1000); the rest come with `more`. */
  maxLinesPerRead?: number;
}

const BUILD = 'depot.build.v1.BuildService';
const CORE_BUILD = 'depot.core.v1.BuildService';
const STEPS_PAGE = 100;
const LOGS_PAGE = 1000;
/** The lookup scans this many ListBuilds pages (newest first): a just-submitted build is near the top. */
const LOOKUP_PAGES = 3;

interface DepotBuildStep {
  name?: string;
  digest?: string;
  startedAt?: string;
  completedAt?: string;
  error?: string;
  hasLogs?: boolean;
}

interface DepotBuild {
  buildId?: string;
  status?: string;
  requestKey?: string;
}

/** Connect error codes worth retrying: the call may succeed later. Everything else in 4xx cannot. */
const RETRYABLE_CODES = new Set(['unavailable', 'resource_exhausted', 'deadline_exceeded', 'aborted', 'internal', 'unknown', 'data_loss']);

/** The error a failed Depot call throws: PermanentError when retrying cannot help, a plain Error when it might. */
export function depotError(rpc: string, httpStatus: number, body: unknown): Error {
  const code = typeof (body as { code?: unknown })?.code === 'string' ? (body as { code: string }).code : undefined;
  const detail = typeof (body as { message?: unknown })?.message === 'string' ? (body as { message: string }).message : undefined;
  const text = `Depot ${rpc} answered ${httpStatus}${code ? ` ${code}` : ''}${detail ? `: ${detail}` : ''}`;
  const retryable = code ? RETRYABLE_CODES.has(code) : httpStatus >= 500 || httpStatus === 408 || httpStatus === 429;
  return retryable || httpStatus >= 500 ? new Error(text) : new PermanentError(text);
}

/** Where readLogs stopped: the step (by index in GetBuildSteps order) and how many of its lines were read. */
const logPosition = z.object({ step: z.number().int().min(0), offset: z.number().int().min(0) });
type Position = z.infer<typeof logPosition>;

export class DepotBuildService implements BuildService {
  private readonly fetch: typeof fetch;

  constructor(private readonly config: DepotConfig) {
    this.fetch = config.fetch ?? ((input, init) => fetch(input, init));
  }

  async submit(request: BuildRequest, options: { signal?: AbortSignal } = {}): Promise<{ buildId: string }> {
    const answer = await this.call<{ buildId?: string }>(BUILD, 'CreateBuild', { projectId: this.config.projectId }, options.signal, {
      'idempotency-key': request.requestKey,
      // URI-encoded: a header value must be ASCII, a branch name need not be.
      'x-starbase-service-id': encodeURIComponent(request.serviceId),
      'x-starbase-branch': encodeURIComponent(request.branch),
      'x-starbase-commit-sha': encodeURIComponent(request.commitSha),
    });
    if (!answer.buildId) throw new Error('Depot CreateBuild answered without a buildId');
    return { buildId: answer.buildId };
  }

  async findByRequestKey(request: BuildRequest, options: { signal?: AbortSignal } = {}): Promise<{ buildId: string } | null> {
    let pageToken: string | undefined;
    for (let page = 0; page < LOOKUP_PAGES; page++) {
      const answer = await this.call<{ builds?: DepotBuild[]; nextPageToken?: string }>(
        CORE_BUILD, 'ListBuilds', { projectId: this.config.projectId, pageSize: 100, ...(pageToken ? { pageToken } : {}) }, options.signal,
      );
      const match = answer.builds?.find((b) => b.requestKey === request.requestKey && b.buildId);
      if (match) return { buildId: match.buildId! };
      pageToken = answer.nextPageToken;
      if (!pageToken) break;
    }
    return null;
  }

  async status(buildId: string, options: { signal?: AbortSignal } = {}): Promise<BuildStatus> {
    const answer = await this.call<{ build?: DepotBuild }>(CORE_BUILD, 'GetBuild', { buildId }, options.signal);
    switch (answer.build?.status) {
      case 'STATUS_RUNNING':
      case 'STATUS_UNSPECIFIED':
      case undefined:
        return { state: 'running' };
      case 'STATUS_SUCCESS':
        return { state: 'succeeded', imageRef: `${this.config.registry ?? 'registry.depot.dev'}/${this.config.projectId}:${buildId}` };
      case 'STATUS_CANCELED':
        return { state: 'cancelled' };
      case 'STATUS_FAILED':
      case 'STATUS_ERROR':
        return { state: 'failed', error: await this.failureOf(buildId, answer.build.status, options.signal) };
      default:
        throw new Error(`Depot GetBuild answered an unknown status ${String(answer.build?.status)}`);
    }
  }

  /**
   * Lines are numbered in step order (the order GetBuildSteps lists them), and a step is read past
   * only once it has ended (or the build has: `final`). BuildKit runs steps in parallel, so a later
   * step may log while an earlier one still runs; holding its lines back until the earlier step ends
   * keeps every line's number fixed, which is what makes archiving idempotent across re-polls.
   */
  async readLogs(buildId: string, cursor: LogCursor | null, options: ReadLogsOptions = {}): Promise<LogPage> {
    const max = this.config.maxLinesPerRead ?? 1000;
    const position: Position = cursor ? logPosition.parse(JSON.parse(cursor.position)) : { step: 0, offset: 0 };
    let lastSeq = cursor?.lastSeq ?? 0;
    const steps = await this.steps(buildId, options.signal);
    const lines: LogLine[] = [];
    let more = false;
    while (position.step < steps.length) {
      const step = steps[position.step];
      if (!step) break;
      const ended = options.final === true || Boolean(step.completedAt || step.error);
      const logs = step.hasLogs && step.digest ? await this.stepLogs(buildId, step.digest, options.signal) : [];
      const unread = logs.slice(position.offset);
      const room = max - lines.length;
      for (const log of unread.slice(0, room)) {
        lines.push({ seq: ++lastSeq, text: log.message ?? '', ...(log.timestamp ? { at: log.timestamp } : {}) });
      }
      position.offset += Math.min(unread.length, room);
      if (unread.length > room) {
        more = true;
        break;
      }
      if (!ended) break;
      position.step++;
      position.offset = 0;
      if (lines.length >= max && position.step < steps.length) {
        more = true;
        break;
      }
    }
    return { lines, cursor: { lastSeq, position: JSON.stringify(position) }, more };
  }

  async cancel(buildId: string, reason: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    try {
      await this.call(BUILD, 'FinishBuild', { buildId, error: { error: reason } }, options.signal);
    } catch (error) {
      // Finishing a build that already finished is Depot's failed_precondition: the goal holds.
      if (error instanceof PermanentError && /failed_precondition/.test(error.message)) return;
      throw error;
    }
  }

  private async failureOf(buildId: string, status: string, signal?: AbortSignal): Promise<string> {
    const failed = (await this.steps(buildId, signal)).find((s) => s.error);
    return failed ? `${failed.name ?? 'a build step'}: ${failed.error}` : `build ended with ${status}`;
  }

  private async steps(buildId: string, signal?: AbortSignal): Promise<DepotBuildStep[]> {
    const steps: DepotBuildStep[] = [];
    let pageToken: string | undefined;
    do {
      const answer = await this.call<{ buildSteps?: DepotBuildStep[]; nextPageToken?: string }>(
        BUILD, 'GetBuildSteps', { projectId: this.config.projectId, buildId, pageSize: STEPS_PAGE, ...(pageToken ? { pageToken } : {}) }, signal,
      );
      steps.push(...(answer.buildSteps ?? []));
      pageToken = answer.nextPageToken || undefined;
    } while (pageToken);
    return steps;
  }

  private async stepLogs(buildId: string, digest: string, signal?: AbortSignal): Promise<{ message?: string; timestamp?: string }[]> {
    const logs: { message?: string; timestamp?: string }[] = [];
    let pageToken: string | undefined;
    do {
      const answer = await this.call<{ logs?: { message?: string; timestamp?: string }[]; nextPageToken?: string }>(
        BUILD, 'GetBuildStepLogs',
        { projectId: this.config.projectId, buildId, buildStepDigest: digest, pageSize: LOGS_PAGE, ...(pageToken ? { pageToken } : {}) },
        signal,
      );
      logs.push(...(answer.logs ?? []));
      pageToken = answer.nextPageToken || undefined;
    } while (pageToken);
    return logs;
  }

  /** One Connect unary call: POST <base>/<package.Service>/<Method>, JSON both ways. */
  private async call<T>(service: string, method: string, body: unknown, signal?: AbortSignal, headers: Record<string, string> = {}): Promise<T> {
    const rpc = `${service}/${method}`;
    const timeout = AbortSignal.timeout(this.config.timeoutMs ?? 15_000);
    let response: Response;
    try {
      response = await this.fetch(`${this.config.baseUrl.replace(/\/+$/, '')}/${rpc}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'connect-protocol-version': '1',
          authorization: `Bearer ${this.config.token}`,
          ...headers,
        },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (error) {
      throw new Error(`Depot ${rpc} failed: ${(error as Error).message}`);
    }
    const text = await response.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : {};
    } catch {
      if (response.ok) throw new Error(`Depot ${rpc} answered ${response.status} with a body that is not JSON`);
    }
    if (!response.ok) throw depotError(rpc, response.status, parsed);
    return parsed as T;
  }
}
