import { Hono, type Context } from 'hono';
import { replayJob, signalJob, type Json, type JsonObject } from '../../queue/index.ts';
import { invocationOf } from '../http/context.ts';
import { toHttpError } from '../http/errors.ts';
import { jsonField, textField } from './forms.ts';
import { requireAction, type DashboardEnv } from './session.ts';

/** Re-renders a job's page with a message (index.tsx renderJob). */
export type RenderJob = (c: Context<DashboardEnv>, id: string, message: { done?: string; error?: string }, status?: 200 | 400 | 409) => Promise<Response>;

/** The largest JSON a payload box takes (the dashboard's forms are at most 16 KiB in all). */
const PAYLOAD_MAX = 16_000;

/**
 * Runs an action of a job's page; bad input (400) and a refusal the job's state makes (409)
 * re-render the page with the reason and that status. The form was checked before the engine
 * was called, and the engine's refusals write nothing.
 */
async function onJobPage(c: Context<DashboardEnv>, render: RenderJob, act: () => Promise<Response>): Promise<Response> {
  try {
    return await act();
  } catch (error) {
    const known = toHttpError(error);
    // scrubbed: the engine's message may quote what was typed (a payload's field)
    if (known && (known.status === 400 || known.status === 409)) return render(c, c.req.param('id')!, { error: (await invocationOf(c)).scrub(known.message) }, known.status);
    throw error;
  }
}

/** The workflow actions of a job's page: send it a signal, replay it. */
export function jobWorkflowRoutes(render: RenderJob): Hono<DashboardEnv> {
  const app = new Hono<DashboardEnv>();

  /** An event for this job (queue/signals.ts signalJob): its wait takes it, or the engine keeps it for its next wait. */
  app.post('/dashboard/jobs/:id/signal', requireAction(), (c) =>
    onJobPage(c, render, async () => {
      const form = await c.req.parseBody();
      const name = textField(form, 'name', { max: 200, required: true })!;
      const key = textField(form, 'key', { max: 500 });
      const payload = jsonField(form, 'payload', { max: PAYLOAD_MAX }) as Json | undefined;
      const id = c.req.param('id');
      const answer = await signalJob((await invocationOf(c)).sql, id, name, { key, payload });
      c.set('kick', answer.delivered.length > 0);
      return c.redirect(`/dashboard/jobs/${id}?done=${answer.delivered.length > 0 ? 'signal-delivered' : 'signal-kept'}`, 303);
    }),
  );

  /** A new job from this ended one (queue/replay.ts replayJob); the browser goes to the new job's page. */
  app.post('/dashboard/jobs/:id/replay', requireAction(), (c) =>
    onJobPage(c, render, async () => {
      const form = await c.req.parseBody();
      const fromStep = textField(form, 'fromStep', { max: 200 });
      const payload = jsonField(form, 'payload', { max: PAYLOAD_MAX, object: true }) as JsonObject | undefined;
      const job = await replayJob((await invocationOf(c)).sql, c.req.param('id'), { fromStep, payload });
      c.set('kick', true);
      return c.redirect(`/dashboard/jobs/${job.id}?done=replay`, 303);
    }),
  );

  return app;
}
