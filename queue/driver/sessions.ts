import type { Queryable } from '../db.ts';

/**
 * worker.dashboard_sessions (migration 0100). `idHash` is the SHA-256 of the cookie's session id;
 * every time is the caller's (tests pin the clock); `idleMs` is the idle timeout.
 */

/** Delete the sessions that have ended (expired or idle), which nothing reads again. */
export async function deleteEndedSessions(sql: Queryable, now: Date, idleMs: number): Promise<void> {
  await sql`
    delete from worker.dashboard_sessions
     where expires_at <= ${now} or last_seen_at <= ${now}::timestamptz - make_interval(secs => ${idleMs / 1000})`;
}

export async function insertSessionRow(sql: Queryable, idHash: Uint8Array, now: Date, expiresAt: Date): Promise<void> {
  await sql`
    insert into worker.dashboard_sessions (id_hash, created_at, last_seen_at, expires_at)
    values (${idHash}, ${now}, ${now}, ${expiresAt})`;
}

/**
 * Slide a live session's idle timeout forward to `now` and return its expiry; an ended one's row
 * is deleted in the same statement (null), so it stays ended whatever clock reads it next.
 */
export async function touchSessionRow(sql: Queryable, idHash: Uint8Array, now: Date, idleMs: number): Promise<Date | null> {
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

export async function deleteSessionRow(sql: Queryable, idHash: Uint8Array): Promise<void> {
  await sql`delete from worker.dashboard_sessions where id_hash = ${idHash}`;
}

/** Delete every session; how many there were. */
export async function deleteAllSessionRows(sql: Queryable): Promise<number> {
  const rows = await sql`delete from worker.dashboard_sessions returning 1`;
  return rows.length;
}
