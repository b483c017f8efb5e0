import { createHash } from 'node:crypto';
import { createDepotWebhooks, type DepotWebhookDelivery, type FinishedStatus } from './depot-webhooks.ts';
import { parseBody, type SandboxProvider, type SandboxRequest, type SandboxResponse } from './server.ts';

/**
 * Depot's build API as the sandbox speaks it: the Connect JSON endpoints the Depot adapter calls
 * (depot.build.v1.BuildService CreateBuild / GetBuildSteps / GetBuildStepLogs / FinishBuild,
 * depot.core.v1.BuildService GetBuild / ListBuilds), with scripted, deterministic builds.
 *
 * A build advances only when it is polled: the n-th GetBuild of a build reveals n · linesPerPoll
 * log lines, and after `polls` answers of STATUS_RUNNING the next one is terminal (`succeed`:
 * STATUS_SUCCESS, `fail`: STATUS_FAILED with the last step's error; `hang` never ends). Lines are
 * spread over `steps` build steps; a step ends once a later step has logged, or the build ended.
 *
 * Beyond Depot: CreateBuild reads `Idempotency-Key` and `X-Starbase-{Service-Id,Branch,Commit-Sha}`
 * headers (Depot has no field for them) to pick a script and to answer the key as
 * `Build.requestKey` in ListBuilds — the lookup the build job uses after a crash.
 *
 * Control (under /_sandbox/depot/):
 *   POST script  {serviceId?, commitSha?, outcome, polls, lines, linesPerPoll?, steps?, error?, logPageSize?, echoAuthorization?}
 *                the script of later builds that match (most specific, then latest, wins)
 *   POST faults  {method, status, code?, message?, times?}  the next `times` calls of a method fail
 *   GET  builds  every build with its state;  GET builds/<id>/log  the build's whole log as text
 *   POST builds/<id>/finish  {outcome?: succeed | fail, error?, timestamp?}  end a running build now
 *                and answer the webhook delivery it made
 *   POST webhook {url, secret}  where build-finished webhooks go (see below); {url: null} stops them
 *   GET  webhooks  every delivery made, as sent, with the answer
 *   POST webhooks/<id>/redeliver {timestamp?}  send a delivery again (Depot-style at-least-once)
 *
 * Build-finished webhook (Depot documents none; the format is this project's, see
 * functions/platform/build/depot-webhook.ts): when a build ends — its last poll, `finishAfterMs`
 * after it was created, the finish control, or FinishBuild — the sandbox POSTs
 * `{id, type: "build.finished", created, data: {projectId, buildId, status}}` with a
 * `Depot-Signature` header to the configured URL and records the delivery (also when no URL is
 * set: then it is recorded, not sent, and a test can relay it).
 */

export interface BuildScript {
  serviceId?: string;
  commitSha?: string;
  outcome: 'succeed' | 'fail' | 'hang';
  /** GetBuild answers STATUS_RUNNING this many times before the terminal answer. */
  polls: number;
  /** Log lines the build writes in all. */
  lines: number;
  /** Lines revealed per GetBuild; default spreads them evenly over the polls. */
  linesPerPoll?: number;
  /** Build steps the lines are spread over; default min(3, lines). */
  steps?: number;
  /** The failing step's error (outcome `fail`). */
  error?: string;
  /**
   * The build ends this long after it was created, however often it is polled (the `polls` count
   * is then ignored): a build that finishes on its own, as a real one does, and sends its webhook.
   */
  finishAfterMs?: number;
  /** GetBuildStepLogs pages hold at most this many lines (exercises paging). */
  logPageSize?: number;
  /**
   * A build that prints the token it was started with: its first log line and its failing step's
   * error quote CreateBuild's Authorization header (for the secret-scrubbing tests).
   */
  echoAuthorization?: boolean;
}

export const DEFAULT_SCRIPT: BuildScript = { outcome: 'succeed', polls: 2, lines: 6 };

interface Fault {
  method: string;
  status: number;
  code: string;
  message: string;
  times: number;
}

interface SandboxBuild {
  buildId: string;
  projectId: string;
  requestKey: string | null;
  serviceId: string | null;
  branch: string | null;
  commitSha: string | null;
  script: BuildScript;
  createdAt: Date;
  /** CreateBuild's Authorization header (quoted by an echoAuthorization script). */
  authorization: string | null;
  /** GetBuild answers so far. */
  polls: number;
  /** Set by FinishBuild, the finish control or `finishAfterMs`. */
  finished: { status: FinishedStatus; reason?: string } | null;
  /** The build-finished webhook was made (once per build; redeliveries aside). */
  notified: boolean;
}

interface Step {
  name: string;
  digest: string;
  /** Line indexes [from, to). */
  from: number;
  to: number;
}

type Status = 'STATUS_RUNNING' | 'STATUS_SUCCESS' | 'STATUS_FAILED' | 'STATUS_CANCELED';

const PREFIX_BUILD = '/depot.build.v1.BuildService/';
const PREFIX_CORE = '/depot.core.v1.BuildService/';

function connectError(status: number, code: string, message: string): SandboxResponse {
  return { status, body: { code, message } };
}

function fieldString(body: Record<string, unknown>, name: string): string | undefined {
  return typeof body[name] === 'string' && body[name] !== '' ? (body[name] as string) : undefined;
}

function scriptFrom(input: unknown): BuildScript | string {
  const s = input as Partial<BuildScript> | null;
  if (!s || typeof s !== 'object') return 'body must be a JSON object';
  if (!['succeed', 'fail', 'hang'].includes(s.outcome as string)) return 'outcome must be succeed, fail or hang';
  const counts = ['polls', 'lines', 'linesPerPoll', 'steps', 'logPageSize', 'finishAfterMs'] as const;
  for (const k of counts) {
    const v = s[k];
    if (v === undefined && k !== 'polls' && k !== 'lines') continue;
    if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > 100_000) return `${k} must be an integer from 0 to 100000`;
  }
  if ((s.linesPerPoll === 0) || s.steps === 0 || s.logPageSize === 0) return 'linesPerPoll, steps and logPageSize must be at least 1';
  return {
    outcome: s.outcome!,
    polls: s.polls!,
    lines: s.lines!,
    ...(s.serviceId ? { serviceId: String(s.serviceId) } : {}),
    ...(s.commitSha ? { commitSha: String(s.commitSha) } : {}),
    ...(s.linesPerPoll ? { linesPerPoll: s.linesPerPoll } : {}),
    ...(s.steps ? { steps: s.steps } : {}),
    ...(s.error ? { error: String(s.error) } : {}),
    ...(s.logPageSize ? { logPageSize: s.logPageSize } : {}),
    ...(s.finishAfterMs !== undefined ? { finishAfterMs: s.finishAfterMs } : {}),
    ...(s.echoAuthorization === true ? { echoAuthorization: true } : {}),
  };
}

/** The builds' log lines, steps and states, all derived from the script and the poll count. */
function stepsOf(build: SandboxBuild): Step[] {
  const total = build.script.lines;
  const count = total === 0 ? 1 : Math.min(build.script.steps ?? 3, total);
  return Array.from({ length: count }, (_, j) => ({
    name: `[${j + 1}/${count}] RUN ./build.sh stage-${j + 1}`,
    digest: `sha256:${createHash('sha256').update(`${build.buildId}/${j}`).digest('hex')}`,
    from: Math.floor((j * total) / count),
    to: Math.floor(((j + 1) * total) / count),
  }));
}

export function logLineText(build: Pick<SandboxBuild, 'serviceId' | 'commitSha' | 'script'> & { authorization?: string | null }, index: number): string {
  const who = `${build.serviceId ?? 'unknown'}@${(build.commitSha ?? 'unknown').slice(0, 7)}`;
  if (build.script.echoAuthorization && index === 0) return `${who} #1/${build.script.lines}: + curl -H "authorization: ${build.authorization}"`;
  return `${who} #${index + 1}/${build.script.lines}: ${index % 5 === 4 ? 'exporting layers' : `step output ${index + 1}`}`;
}

function statusOf(build: SandboxBuild): Status {
  if (build.finished) return build.finished.status;
  if (build.script.outcome === 'hang' || build.script.finishAfterMs !== undefined || build.polls <= build.script.polls) return 'STATUS_RUNNING';
  return build.script.outcome === 'succeed' ? 'STATUS_SUCCESS' : 'STATUS_FAILED';
}

/** Lines written so far. */
function visibleLines(build: SandboxBuild): number {
  const { lines, polls, linesPerPoll } = build.script;
  const status = statusOf(build);
  if (status === 'STATUS_SUCCESS' || status === 'STATUS_FAILED') return lines;
  const perPoll = linesPerPoll ?? Math.ceil(lines / Math.max(1, polls + (build.script.outcome === 'hang' ? 0 : 1)));
  return Math.min(lines, build.polls * perPoll);
}

function stepView(build: SandboxBuild, step: Step, index: number, steps: Step[]) {
  const status = statusOf(build);
  const visible = visibleLines(build);
  const started = index === 0 || visible > step.from || status === 'STATUS_SUCCESS' || status === 'STATUS_FAILED';
  if (!started) return null;
  const last = index === steps.length - 1;
  const failedHere = status === 'STATUS_FAILED' && last;
  // Cancelling leaves the running step open, as a real interrupted build does.
  const ended = visible > step.to || status === 'STATUS_SUCCESS' || status === 'STATUS_FAILED' || (status === 'STATUS_CANCELED' && visible >= step.to && !last);
  const at = (offset: number) => new Date(build.createdAt.getTime() + offset * 1000).toISOString();
  return {
    name: step.name,
    digest: step.digest,
    startedAt: at(step.from),
    ...(ended ? { completedAt: at(step.to) } : {}),
    cacheState: 'CACHE_STATE_UNCACHED',
    ...(failedHere
      ? {
          error:
            (build.script.error ?? 'process "/bin/sh -c ./build.sh" did not complete successfully: exit code: 1') +
            (build.script.echoAuthorization ? ` (authorization: ${build.authorization})` : ''),
        }
      : {}),
    hasLogs: step.to > step.from,
  };
}

export function createDepotSandbox(): SandboxProvider & { builds(): SandboxBuild[]; webhooks(): DepotWebhookDelivery[] } {
  let scripts: BuildScript[] = [];
  let faults: Fault[] = [];
  let builds: SandboxBuild[] = [];
  let counter = 0;
  const webhooks = createDepotWebhooks();
  let timers: NodeJS.Timeout[] = [];

  /** Once a build has ended (however it did), its webhook goes out, once. */
  function notifyIfFinished(build: SandboxBuild, timestampSeconds?: number): Promise<DepotWebhookDelivery> | null {
    const status = statusOf(build);
    if (status === 'STATUS_RUNNING' || build.notified) return null;
    build.notified = true;
    return webhooks.finished(build, status, timestampSeconds);
  }

  function finishNow(build: SandboxBuild, outcome: 'succeed' | 'fail', error?: string): void {
    if (outcome === 'fail' && error) build.script = { ...build.script, error };
    build.finished = { status: outcome === 'succeed' ? 'STATUS_SUCCESS' : 'STATUS_FAILED' };
  }

  const scriptFor = (serviceId: string | null, commitSha: string | null): BuildScript => {
    const score = (s: BuildScript) => {
      if (s.serviceId !== undefined && s.serviceId !== serviceId) return -1;
      if (s.commitSha !== undefined && s.commitSha !== commitSha) return -1;
      return (s.serviceId !== undefined ? 2 : 0) + (s.commitSha !== undefined ? 1 : 0);
    };
    let best: BuildScript | undefined;
    for (const s of scripts) if (score(s) >= 0 && (!best || score(s) >= score(best))) best = s;
    return best ?? DEFAULT_SCRIPT;
  };

  const find = (body: Record<string, unknown>) => builds.find((b) => b.buildId === fieldString(body, 'buildId'));

  function fullLog(build: SandboxBuild): string {
    return Array.from({ length: build.script.lines }, (_, i) => `${logLineText(build, i)}\n`).join('');
  }

  function buildView(build: SandboxBuild) {
    return { buildId: build.buildId, status: statusOf(build), createdAt: build.createdAt.toISOString(), requestKey: build.requestKey ?? undefined };
  }

  function page<T>(items: T[], body: Record<string, unknown>, defaultSize: number, cap = Infinity) {
    const size = Math.min(cap, typeof body.pageSize === 'number' && body.pageSize > 0 ? body.pageSize : defaultSize);
    const start = Number(fieldString(body, 'pageToken') ?? 0) || 0;
    const next = start + size < items.length ? String(start + size) : undefined;
    return { items: items.slice(start, start + size), ...(next ? { nextPageToken: next } : {}) };
  }

  const methods: Record<string, (body: Record<string, unknown>, req: SandboxRequest) => SandboxResponse> = {
    CreateBuild(body, req) {
      const projectId = fieldString(body, 'projectId');
      if (!projectId) return connectError(400, 'invalid_argument', 'project_id is required');
      const header = (name: string) => (req.headers[name] === undefined ? null : decodeURIComponent(req.headers[name]!));
      const serviceId = header('x-starbase-service-id');
      const commitSha = header('x-starbase-commit-sha');
      const build: SandboxBuild = {
        buildId: `sbx${(++counter).toString(36).padStart(7, '0')}`,
        projectId,
        requestKey: req.headers['idempotency-key'] ?? null,
        serviceId,
        branch: header('x-starbase-branch'),
        commitSha,
        script: scriptFor(serviceId, commitSha),
        createdAt: new Date(),
        authorization: req.headers.authorization ?? null,
        polls: 0,
        finished: null,
        notified: false,
      };
      builds.push(build);
      const after = build.script.finishAfterMs;
      if (after !== undefined && build.script.outcome !== 'hang') {
        const timer = setTimeout(() => {
          if (statusOf(build) !== 'STATUS_RUNNING') return;
          finishNow(build, build.script.outcome === 'succeed' ? 'succeed' : 'fail');
          void notifyIfFinished(build);
        }, after);
        timer.unref();
        timers.push(timer);
      }
      return { status: 200, body: { buildId: build.buildId, buildToken: `sbx-build-token-${build.buildId}` } };
    },
    GetBuild(body) {
      const build = find(body);
      if (!build) return connectError(404, 'not_found', 'build not found');
      build.polls++;
      // the poll that ends a build is answered at once; its webhook goes out beside it
      void notifyIfFinished(build);
      return { status: 200, body: { build: buildView(build) } };
    },
    ListBuilds(body) {
      const projectId = fieldString(body, 'projectId');
      if (!projectId) return connectError(400, 'invalid_argument', 'project_id is required');
      const newestFirst = builds.filter((b) => b.projectId === projectId).reverse().map(buildView);
      const { items, nextPageToken } = page(newestFirst, body, 100);
      return { status: 200, body: { builds: items, ...(nextPageToken ? { nextPageToken } : {}) } };
    },
    GetBuildSteps(body) {
      const build = find(body);
      if (!build || build.projectId !== fieldString(body, 'projectId')) return connectError(404, 'not_found', 'build not found');
      const steps = stepsOf(build);
      const views = steps.map((s, i) => stepView(build, s, i, steps)).filter((v) => v !== null);
      const { items, nextPageToken } = page(views, body, 100);
      return { status: 200, body: { buildSteps: items, ...(nextPageToken ? { nextPageToken } : {}) } };
    },
    GetBuildStepLogs(body) {
      const build = find(body);
      if (!build || build.projectId !== fieldString(body, 'projectId')) return connectError(404, 'not_found', 'build not found');
      const step = stepsOf(build).find((s) => s.digest === fieldString(body, 'buildStepDigest'));
      if (!step) return connectError(404, 'not_found', 'build step not found');
      const visible = Math.min(step.to, visibleLines(build));
      const lines = Array.from({ length: Math.max(0, visible - step.from) }, (_, k) => ({
        message: logLineText(build, step.from + k),
        timestamp: new Date(build.createdAt.getTime() + (step.from + k) * 1000).toISOString(),
      }));
      const { items, nextPageToken } = page(lines, body, 1000, build.script.logPageSize);
      return { status: 200, body: { logs: items, ...(nextPageToken ? { nextPageToken } : {}) } };
    },
    FinishBuild(body) {
      const build = find(body);
      if (!build) return connectError(404, 'not_found', 'build not found');
      if (statusOf(build) !== 'STATUS_RUNNING') return connectError(400, 'failed_precondition', 'build has already finished');
      const error = body.error as { error?: unknown } | undefined;
      build.finished = error && typeof error === 'object'
        ? { status: 'STATUS_CANCELED', reason: typeof error.error === 'string' ? error.error : 'finished with an error' }
        : { status: 'STATUS_SUCCESS' };
      void notifyIfFinished(build);
      return { status: 200, body: {} };
    },
  };

  /** The webhook controls: where deliveries go, the deliveries made, finishing a build now, redelivering. */
  function webhookControl(path: string, req: SandboxRequest): Promise<SandboxResponse> | SandboxResponse | null {
    const body = (parseBody(req) ?? {}) as Record<string, unknown>;
    const timestamp = Number.isInteger(body.timestamp) ? (body.timestamp as number) : undefined;
    if (path === '/webhook' && req.method === 'POST') {
      if (body.url !== null && typeof body.url !== 'string') return { status: 400, body: { error: 'url must be a URL or null' } };
      if (body.secret !== undefined && (typeof body.secret !== 'string' || body.secret === '')) return { status: 400, body: { error: 'secret must be a non-empty string' } };
      const target = webhooks.configure({ url: body.url as string | null, secret: body.secret as string | undefined });
      return { status: 200, body: { url: target.url } };
    }
    if (path === '/webhooks' && req.method === 'GET') return { status: 200, body: { deliveries: webhooks.deliveries() } };
    const finish = /^\/builds\/([^/]+)\/finish$/.exec(path);
    if (finish && req.method === 'POST') {
      const build = builds.find((b) => b.buildId === finish[1]);
      if (!build) return { status: 404, body: { error: `no build ${finish[1]}` } };
      if (statusOf(build) !== 'STATUS_RUNNING') return { status: 409, body: { error: `build ${build.buildId} has already ended` } };
      finishNow(build, body.outcome === 'fail' ? 'fail' : 'succeed', typeof body.error === 'string' ? body.error : undefined);
      return notifyIfFinished(build, timestamp)!.then((delivery) => ({ status: 200, body: { delivery } }));
    }
    const again = /^\/webhooks\/([^/]+)\/redeliver$/.exec(path);
    if (again && req.method === 'POST') {
      return webhooks.redeliver(again[1]!, timestamp).then((delivery) =>
        delivery ? { status: 200, body: { delivery } } : { status: 404, body: { error: `no delivery ${again[1]}` } },
      );
    }
    return null;
  }

  return {
    name: 'depot',
    builds: () => builds,
    webhooks: () => webhooks.deliveries(),

    handle(req) {
      const service = req.path.startsWith(PREFIX_BUILD) ? 'build' : req.path.startsWith(PREFIX_CORE) ? 'core' : null;
      if (!service) return undefined;
      const method = req.path.slice((service === 'build' ? PREFIX_BUILD : PREFIX_CORE).length);
      const known = service === 'build' ? ['CreateBuild', 'GetBuildSteps', 'GetBuildStepLogs', 'FinishBuild'] : ['GetBuild', 'ListBuilds'];
      if (!known.includes(method)) return connectError(404, 'unimplemented', `${req.path} is not implemented by the sandbox`);
      if (req.method !== 'POST') return { status: 405, headers: { allow: 'POST' }, body: { code: 'unimplemented', message: 'Connect unary calls are POST' } };
      if (!/^Bearer \S+/.test(req.headers.authorization ?? '')) return connectError(401, 'unauthenticated', 'missing or malformed bearer token');
      if (!(req.headers['content-type'] ?? '').includes('application/json')) return { status: 415, body: { code: 'invalid_argument', message: 'content-type must be application/json' } };
      const fault = faults.find((f) => f.method === method && f.times > 0);
      if (fault) {
        fault.times--;
        return connectError(fault.status, fault.code, fault.message);
      }
      const body = parseBody(req);
      if (!body || typeof body !== 'object') return connectError(400, 'invalid_argument', 'request body must be a JSON object');
      return methods[method]!(body as Record<string, unknown>, req);
    },

    control(path, req) {
      if (path === '/script' && req.method === 'POST') {
        const script = scriptFrom(parseBody(req));
        if (typeof script === 'string') return { status: 400, body: { error: script } };
        scripts.push(script);
        return { status: 200, body: { script } };
      }
      if (path === '/faults' && req.method === 'POST') {
        const f = parseBody(req) as Partial<Fault> | null;
        if (!f || typeof f.method !== 'string' || !Number.isInteger(f.status)) return { status: 400, body: { error: 'method and status are required' } };
        const fault: Fault = { method: f.method, status: f.status!, code: f.code ?? 'unavailable', message: f.message ?? 'sandbox fault', times: f.times ?? 1 };
        faults.push(fault);
        return { status: 200, body: { fault } };
      }
      if (path === '/builds' && req.method === 'GET') {
        return {
          status: 200,
          body: {
            builds: builds.map((b) => ({
              ...buildView(b), projectId: b.projectId, serviceId: b.serviceId, branch: b.branch, commitSha: b.commitSha,
              polls: b.polls, script: b.script, finished: b.finished,
            })),
          },
        };
      }
      const answer = webhookControl(path, req);
      if (answer) return answer;
      const log = /^\/builds\/([^/]+)\/log$/.exec(path);
      if (log && req.method === 'GET') {
        const build = builds.find((b) => b.buildId === log[1]);
        return build ? { status: 200, body: fullLog(build) } : { status: 404, body: { error: `no build ${log[1]}` } };
      }
      return { status: 404, body: { error: `no depot sandbox control ${req.method} ${path}` } };
    },

    reset() {
      scripts = [];
      faults = [];
      builds = [];
      counter = 0;
      for (const timer of timers) clearTimeout(timer);
      timers = [];
      webhooks.reset();
    },
  };
}
