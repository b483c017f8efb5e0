import type { Queryable } from './db.ts';

/**
 * The dashboard's session rows (worker.dashboard_sessions, migration 0100): the only SQL the
 * dashboard's session module (functions/dashboard/session.ts) runs, kept in the engine. `idHash`
 * is the SHA-256 of the cookie's session id. Every time is passed in (tests pin the clock);
 * `idleMs` is the idle timeout.
 */

/** A new session; first deletes the rows that have ended (expired or idle), which nothing reads again. */
export async function insertSession(sql: Queryable, idHash: Uint8Array, now: Date, expiresAt: Date, idleMs: number): Promise<void> {
  await sql`
    delete from worker.dashboard_sessions
     where expires_at <= ${now} or last_seen_at <= ${now}::timestamptz - make_interval(secs => ${idleMs / 1000})`;
  await sql`
    insert into worker.dashboard_sessions (id_hash, created_at, last_seen_at, expires_at)
    values (${idHash}, ${now}, ${now}, ${expiresAt})`;
}

/**
 * The session's expiry if it is live (its row exists, not expired, used within the idle timeout),
 * sliding its idle timeout forward to `now`; null when it has ended — and then its row is deleted
 * in the same statement, so an ended session stays ended whatever clock reads it next.
 */
export async function touchSession(sql: Queryable, idHash: Uint8Array, now: Date, idleMs: number): Promise<Date | null> {
  const idleSince = sql`${now}::timestamptz - make_interval(secs => ${idleMs / 1000})`;
  const [row] = await sql<{ expires_at: Date }[]>`
    with ended as (
      delete from worker.dashboard_sessions
       where id_hash = ${idHash} and (expires_at <= ${now} or last_seen_at <= ${idleSince})
    )
    update worker.dashboard_sessions set last_seen_at = greatest(last_seen_at, ${now})
     where id_hash = ${idHash} and expires_at > ${now} and last_seen_at > ${idleSince}
     returning expires_at`;
  return row ? row.expires_at : null;
}

export async function deleteSession(sql: Queryable, idHash: Uint8Array): Promise<void> {
  await sql`delete from worker.dashboard_sessions where id_hash = ${idHash}`;
}

/** Log out everywhere: every session ends. The number of sessions ended. */
export async function deleteAllSessions(sql: Queryable): Promise<number> {
  const rows = await sql`delete from worker.dashboard_sessions returning 1`;
  return rows.length;
}
