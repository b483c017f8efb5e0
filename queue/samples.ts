import { z } from 'zod';
import { defineJobType, done, next, waitFor } from './registry.ts';

/**
 * Built-in sample types, always registered: operators use them to smoke-test a deployment, so
 * they are public (the enqueue token may enqueue them over POST /v1/jobs).
 */

/** Upper-cases `text` (at most 64 Ki characters: checked at enqueue, from SQL too). */
export const uppercase = defineJobType({
  type: 'uppercase',
  access: 'public',
  payload: z.object({ text: z.string().max(65_536) }),
  async run({ payload }) {
    return done({ text: payload.text.toUpperCase() });
  },
});

/** n checkpointed steps, then result {steps: n}. */
export const countdown = defineJobType({
  type: 'countdown',
  access: 'public',
  payload: z.object({ n: z.number().int().min(0).max(10_000), delayMs: z.number().int().min(0).max(3_600_000).optional() }),
  async run({ payload, checkpoint }) {
    const taken = typeof checkpoint.taken === 'number' ? checkpoint.taken : 0;
    if (taken >= payload.n) return done({ steps: payload.n });
    return next('count', { checkpoint: { taken: taken + 1 }, delayMs: payload.delayMs ?? 0 });
  },
});

/** Always throws: exercises retries, the poison alert and `failed`. */
export const fail = defineJobType({
  type: 'fail',
  access: 'public',
  payload: z.object({ message: z.string().max(1000).optional() }),
  retry: { baseMs: 100, maxMs: 1000 },
  async run({ payload, attempt }) {
    throw new Error(payload.message ?? `sample failure (attempt ${attempt})`);
  },
});

/** Waits for the event `name` (with `key`, `timeoutMs`), then ends with result {event: how the wait ended}. */
export const awaitSignal = defineJobType({
  type: 'await_signal',
  access: 'public',
  payload: z.object({
    name: z.string().min(1).max(200),
    key: z.string().min(1).max(500).optional(),
    timeoutMs: z.number().int().min(1).max(30 * 86_400_000).optional(),
  }),
  async run({ payload, step, event }) {
    if (step === 'start') return waitFor(payload.name, { key: payload.key, timeoutMs: payload.timeoutMs, step: 'resumed' });
    return done({ event: event ?? null });
  },
});

export const sampleJobTypes = [uppercase, countdown, fail, awaitSignal];
