import type { Queryable } from './db.ts';
import * as driver from './driver/sessions.ts';

/**
 * The dashboard's sessions (worker.dashboard_sessions, migration 0100): what the dashboard's
 * session module (functions/dashboard/session.ts) calls, kept in the engine. `idHash` is the
 * SHA-256 of the cookie's session id. Every time is passed in (tests pin the clock); `idleMs` is
 * the idle timeout.
 */

/** A new session; first deletes the rows that have ended (expired or idle), which nothing reads again. */
export async function insertSession(sql: Queryable, idHash: Uint8Array, now: Date, expiresAt: Date, idleMs: number): Promise<void> {
  await driver.deleteEndedSessions(sql, now, idleMs);
  await driver.insertSessionRow(sql, idHash, now, expiresAt);
}

/**
 * The session's expiry if it is live (its row exists, not expired, used within the idle timeout),
 * sliding its idle timeout forward to `now`; null when it has ended — and then its row is deleted
 * in the same statement, so an ended session stays ended whatever clock reads it next.
 */
export async function touchSession(sql: Queryable, idHash: Uint8Array, now: Date, idleMs: number): Promise<Date | null> {
  return driver.touchSessionRow(sql, idHash, now, idleMs);
}

export async function deleteSession(sql: Queryable, idHash: Uint8Array): Promise<void> {
  await driver.deleteSessionRow(sql, idHash);
}

/** Log out everywhere: every session ends. The number of sessions ended. */
export async function deleteAllSessions(sql: Queryable): Promise<number> {
  return driver.deleteAllSessionRows(sql);
}
