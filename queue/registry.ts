import { z } from 'zod';
import type { Sql } from './db.ts';
import { upsertJobTypes } from './driver/job-types.ts';
import { checkFlowControl, rateLimitRows, type TypeRateLimit } from './flow-types.ts';
import { DEADLINE_SEVERITIES, type DeadlineSeverity, type Job, type Json, type JsonObject } from './job.ts';
import type { SettleEffect } from './settle.ts';
import type { WaitEvent, WaitResult } from './signals/wait.ts';

export { waitFor } from './signals/wait.ts';
import type { ChildOutcome, SpawnResult } from './children.ts';

/** What a step sees. */
export interface StepContext<P> {
  job: Job;
  /** The payload, validated by the type's schema. */
  payload: P;
  /** The step to run ('start' for a new job). */
  step: string;
  /** What earlier steps saved. */
  checkpoint: JsonObject;
  /** 1 on the first try of this step, 2 on its first retry, … */
  attempt: number;
  /** Aborted when the lease is lost or the runner shuts down: stop and throw. */
  signal: AbortSignal;
  sql: Sql;
  /** The runner's clock (pinned in tests). */
  now(): Date;
  /** How the wait this step resumes from ended (a waitFor's event or its timeout); undefined when it resumes from none. */
  event?: WaitEvent;
  /** The children of the job's latest spawn (queue/children.ts) with their outcomes, in the order given; [] if it never spawned. */
  children(): Promise<ChildOutcome[]>;
}

/** How a step ends. A thrown error means retry (or fail, for a PermanentError). */
export type StepResult =
  | { outcome: 'done'; result?: Json; effect?: SettleEffect }
  | { outcome: 'continue'; step: string; checkpoint?: JsonObject; delayMs?: number | null; effect?: SettleEffect }
  | WaitResult
  | SpawnResult;

export const done = (result?: Json, effect?: SettleEffect): StepResult => ({ outcome: 'done', result, effect });
/** Save state and run `step` after `delayMs` (null: park until resumed). */
export const next = (step: string, options: { checkpoint?: JsonObject; delayMs?: number | null; effect?: SettleEffect } = {}): StepResult => ({
  outcome: 'continue',
  step,
  ...options,
});

export interface RetryPolicy {
  /** First retry delay; doubles each attempt. */
  baseMs: number;
  maxMs: number;
}

export interface JobType<P = unknown> {
  type: string;
  payload: z.ZodType<P>;
  /** Lease per claim (default 2 min); heartbeats extend it while a step runs. */
  leaseMs?: number;
  maxAttempts?: number;
  weight?: string;
  retry?: RetryPolicy;
  /**
   * Every job of the type should be done within this long of its enqueue (1 ms to 30 days);
   * past it the leader's tick opens a deadline_missed alert for the job. A job's own
   * deadlineMs (enqueue) overrides it.
   */
  deadlineMs?: number;
  /** How loud the type's missed deadline is (default 'warning'; 'critical' is the manual's P1). */
  deadlineSeverity?: DeadlineSeverity;
  /**
   * Who may enqueue this type over the generic routes (`POST /v1/jobs`, `/v1/jobs/batch`).
   * 'public': the enqueue scope. 'internal' (the default: a type that says nothing is not
   * exposed): only the admin scope there; the type is meant to be enqueued by the engine itself
   * (a cron slot, a parent job) or by its own route, which `enqueueVia` names for the refusal.
   * Enqueue from TypeScript and SQL is the deployment's own code and is not gated.
   */
  access?: JobAccess;
  /** How an internal type is enqueued (`POST /v1/databases`, `the billing_cron schedule`): told to a refused caller. */
  enqueueVia?: string;
  /**
   * The concurrency key every job of this type gets, derived from its payload at enqueue (in SQL,
   * so every path gets it): `key` with each `{field}` replaced by that top-level payload field
   * (`provision:{accountId}`; a literal prefix first), at most `limit` of them running at once.
   * A caller's different concurrencyKey or concurrencyLimit for the type is refused (SB400), and
   * so is a key of this shape on a job of any other type.
   */
  concurrency?: TypeConcurrency;
  /**
   * At most `limit` steps of the key's jobs start in any window of `per` (`'10s'`, `'1m'`, `'1h'`,
   * or milliseconds), across every runner; keys are shared by the types that name them. A step
   * that throws a rate-limit error (RateLimitedError) pauses the key for its retryAfterMs.
   */
  rateLimit?: TypeRateLimit;
  /**
   * Claims take due jobs round-robin across fairness keys (a template over the payload's
   * top-level fields, as a concurrency key: `account:{accountId}`), so one key's flood cannot
   * hold back another key's job for more than a claim batch.
   */
  fairness?: { key: string };
  run(ctx: StepContext<P>): Promise<StepResult>;
  /** Runs when a started job is cancelled: undo or stop work at providers. */
  onCancel?(ctx: StepContext<P>): Promise<void>;
  /** Runs after the job ended failed (attempts used up or permanent error): compensation. */
  onFailed?(ctx: StepContext<P>, error: string): Promise<void>;
}

export type JobAccess = 'public' | 'internal';

export type { TypeRateLimit } from './flow-types.ts';

export interface TypeConcurrency {
  /** A template over the payload's top-level fields: `provision:{accountId}`. */
  key: string;
  limit: number;
}

/** The longest deadline worker.job_types and the enqueue accept (0180): 30 days. */
export const MAX_DEADLINE_MS = 30 * 86_400_000;

/** What worker.job_types accepts as a concurrency key template (0120's check). */
const CONCURRENCY_TEMPLATE = /^[^{}]+(\{[A-Za-z_][A-Za-z0-9_]*\}[^{}]*)*$/;

export function defineJobType<P>(definition: JobType<P>): JobType<P> {
  checkDeclaration(definition);
  return definition;
}

/** A declaration the sync would fail to store is refused where it is written, naming the type. */
function checkDeclaration(t: JobType<any>): void {
  if (t.access !== undefined && t.access !== 'public' && t.access !== 'internal') {
    throw new Error(`job type ${t.type}: access must be 'public' or 'internal', got ${JSON.stringify(t.access)}`);
  }
  if (t.enqueueVia !== undefined && (t.enqueueVia.length < 1 || t.enqueueVia.length > 200)) {
    throw new Error(`job type ${t.type}: enqueueVia must be 1 to 200 characters`);
  }
  if (t.deadlineMs !== undefined && (!Number.isInteger(t.deadlineMs) || t.deadlineMs < 1 || t.deadlineMs > MAX_DEADLINE_MS)) {
    throw new Error(`job type ${t.type}: deadlineMs must be an integer from 1 to ${MAX_DEADLINE_MS} (30 days), got ${t.deadlineMs}`);
  }
  if (t.deadlineSeverity !== undefined) {
    if (!DEADLINE_SEVERITIES.includes(t.deadlineSeverity)) {
      throw new Error(`job type ${t.type}: deadlineSeverity must be 'warning' or 'critical', got ${JSON.stringify(t.deadlineSeverity)}`);
    }
    if (t.deadlineMs === undefined) throw new Error(`job type ${t.type}: deadlineSeverity needs a deadlineMs`);
  }
  checkFlowControl(t);
  const c = t.concurrency;
  if (c !== undefined) {
    if (!CONCURRENCY_TEMPLATE.test(c.key) || c.key.length > 200) {
      throw new Error(`job type ${t.type}: concurrency.key must be literal text with {field} placeholders, starting with literal text (e.g. provision:{accountId}), got ${JSON.stringify(c.key)}`);
    }
    if (!Number.isInteger(c.limit) || c.limit < 1 || c.limit > 10_000) {
      throw new Error(`job type ${t.type}: concurrency.limit must be an integer from 1 to 10000, got ${c.limit}`);
    }
  }
}

const DEFAULT_RETRY: RetryPolicy = { baseMs: 1000, maxMs: 5 * 60_000 };

/** Exponential backoff with jitter: a delay in [d/2, d] where d = base · 2^(attempt-1), capped. */
export function backoffMs(policy: RetryPolicy | undefined, attempt: number, random: () => number = Math.random): number {
  const p = policy ?? DEFAULT_RETRY;
  const d = Math.min(p.maxMs, p.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(d / 2 + random() * (d / 2));
}

/** The job types a runner can run. */
export class JobRegistry {
  private readonly types = new Map<string, JobType<unknown>>();

  constructor(types: JobType<any>[] = []) {
    for (const t of types) this.register(t);
  }

  register<P>(type: JobType<P>): this {
    if (this.types.has(type.type)) throw new Error(`job type ${type.type} is registered twice`);
    checkDeclaration(type);
    this.types.set(type.type, type as JobType<unknown>);
    return this;
  }

  get(type: string): JobType<unknown> | undefined {
    return this.types.get(type);
  }

  list(): JobType<unknown>[] {
    return [...this.types.values()];
  }

  /**
   * Record the types in worker.job_types (lease, attempts, weight, the payload's JSON Schema, who
   * may enqueue the type over the generic routes, its own concurrency key and its deadline), so
   * enqueue from SQL accepts them, checks their payloads and gives them their key and deadline, the HTTP routes know which
   * are public, and the claim uses their lease. Idempotent.
   */
  async sync(sql: Sql): Promise<void> {
    const rows = this.list().map((t) => ({
      type: t.type,
      lease_ms: t.leaseMs ?? 120_000,
      max_attempts: t.maxAttempts ?? 3,
      weight: t.weight ?? 'light',
      payload_schema: payloadJsonSchema(t.payload),
      access: t.access ?? 'internal',
      enqueue_via: t.enqueueVia ?? null,
      concurrency_key: t.concurrency?.key ?? null,
      concurrency_limit: t.concurrency?.limit ?? null,
      deadline_ms: t.deadlineMs ?? null,
      deadline_severity: t.deadlineMs === undefined ? null : (t.deadlineSeverity ?? 'warning'),
      rate_key: t.rateLimit?.key ?? null,
      fair_key: t.fairness?.key ?? null,
    }));
    if (rows.length === 0) return;
    await upsertJobTypes(sql, rows, rateLimitRows(this.list()));
  }
}

type ZodNode = { _zod: { def: { type: string; coerce?: boolean; in?: ZodNode; innerType?: ZodNode; getter?: () => ZodNode; options?: ZodNode[]; left?: ZodNode; right?: ZodNode; shape?: Record<string, ZodNode> } } };

/**
 * Whether zod accepts this schema's input in ways its generated JSON Schema does not say: a
 * coerced primitive (takes any value), `.catch()` (takes anything), a preprocess or transform
 * input, a custom check. Such a node becomes `{}` (anything) for the enqueue check.
 */
function lenient(node: ZodNode): boolean {
  const def = node._zod.def;
  if (def.coerce) return true;
  switch (def.type) {
    case 'catch': case 'transform': case 'custom': case 'success': case 'any': case 'unknown':
      return true;
    case 'pipe':
      return def.in ? lenient(def.in) : true;
    case 'readonly': case 'nonoptional':
      return def.innerType ? lenient(def.innerType) : true;
    case 'lazy':
      return def.getter ? lenient(def.getter()) : true;
    default:
      return false;
  }
}

/** Whether zod accepts the key missing from its object although the JSON Schema may list it as required. */
function acceptsMissing(node: ZodNode): boolean {
  const def = node._zod.def;
  if (lenient(node)) return true;
  switch (def.type) {
    case 'optional': case 'default': case 'prefault':
      return true;
    case 'nullable': case 'readonly': case 'nonoptional':
      return def.type !== 'nonoptional' && def.innerType ? acceptsMissing(def.innerType) : false;
    case 'lazy':
      return def.getter ? acceptsMissing(def.getter()) : true;
    case 'union':
      return (def.options ?? []).some(acceptsMissing);
    case 'intersection':
      return (def.left ? acceptsMissing(def.left) : true) || (def.right ? acceptsMissing(def.right) : true);
    default:
      return false;
  }
}

/**
 * The JSON Schema of a payload's input, for enqueue to check from SQL (worker.check_payload):
 * zod's own generator (`z.toJSONSchema`, input side), with every node whose acceptance it cannot
 * state widened to `{}` so the check never refuses a payload zod would accept. null when the
 * schema cannot be generated: then enqueue checks only that the payload is an object.
 */
export function payloadJsonSchema(schema: z.ZodType): JsonObject | null {
  try {
    const json = z.toJSONSchema(schema, {
      io: 'input',
      unrepresentable: 'any',
      cycles: 'ref',
      reused: 'inline',
      override: ({ zodSchema, jsonSchema }) => {
        const node = zodSchema as unknown as ZodNode;
        const target = jsonSchema as Record<string, unknown>;
        if (lenient(node)) {
          for (const key of Object.keys(target)) delete target[key];
          return;
        }
        const shape = node._zod.def.type === 'object' ? node._zod.def.shape : undefined;
        if (shape && Array.isArray(target.required)) {
          target.required = (target.required as string[]).filter((k) => !(shape[k] && acceptsMissing(shape[k]!)));
        }
      },
    }) as Record<string, unknown>;
    delete json.$schema;
    return json as JsonObject;
  } catch {
    return null;
  }
}
