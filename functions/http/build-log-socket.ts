import { TERMINAL_STATUSES, type Job } from '../../queue/index.ts';
import type { WorkerEnv } from '../config.ts';
import { HttpError } from './errors.ts';

/** A WebSocket handshake (the header is case-insensitive: `websocket`, `WebSocket`). */
export function isWebSocketUpgrade(request: Request): boolean {
  return request.headers.get('upgrade')?.toLowerCase() === 'websocket';
}

/**
 * Joins a build's live log: the WebSocket upgrade is forwarded to the build's BuildLogRelay object
 * (one per build job, named by its id), which answers 101 and sends `{type:'lines', lines:[{seq,
 * text}]}` then `{type:'end', outcome}`. A finished build has nothing live left: 410, and its
 * archive is the log. Both the API's bearer route and the dashboard's session route come here,
 * after each has authenticated the caller its own way; `archiveHint` says where that caller finds
 * the archive.
 */
export async function joinBuildRelay(env: WorkerEnv, build: Job, request: Request, archiveHint: string): Promise<Response> {
  if (TERMINAL_STATUSES.includes(build.status)) throw new HttpError(410, 'build_finished', `the build has finished: ${archiveHint}`);
  const relay = env.BUILD_LOG_RELAY;
  return relay.get(relay.idFromName(build.id)).fetch(request);
}
