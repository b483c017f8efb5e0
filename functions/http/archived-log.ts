import type { Context } from 'hono';
import { isInProgress, type Job } from '../../queue/index.ts';
import { readConfig, type WorkerEnv } from '../config.ts';
import { logArchiveOf } from '../platform/log-store.ts';
import { envSecrets } from '../invocation.ts';
import { scrubText } from '../lib/redact.ts';

/**
 * A build's archived log as plain text (what is archived so far while it runs); the dashboard
 * serves it too. The lines are the build's own output, HTML included: nosniff and a sandboxing CSP
 * keep a browser from ever rendering or running them, and no cache keeps a copy.
 */
export async function archivedLog<E extends { Bindings: WorkerEnv }>(c: Context<E>, build: Job): Promise<Response> {
  const archived = await readArchivedLog(c.env, build);
  return c.body(archived.text, 200, {
    'content-type': 'text/plain; charset=utf-8',
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; sandbox",
    'cache-control': 'no-store',
    'x-build-status': build.status,
    // between polls a build's status is `queued`: this says it has started and not finished
    'x-build-in-progress': String(isInProgress(build)),
    'x-build-last-line': String(archived.lastSeq),
  });
}

/** The build's archived log so far, scrubbed: lines are scrubbed before they are archived; an archive written before that was not. */
export async function readArchivedLog(env: WorkerEnv, build: Job): Promise<{ text: string; lastSeq: number }> {
  const archived = await logArchiveOf(env, readConfig(env).platform.logStore).read(build.id);
  return { text: scrubText(archived?.text ?? '', envSecrets(env)), lastSeq: archived?.lastSeq ?? 0 };
}
