import type { Queryable } from '../db.ts';

/**
 * The engine's clock inside a statement: the caller's pinned instant when it gave one (tests,
 * the model, a maintenance run that must see one time), else the database's `now()` — the one
 * clock every replica agrees on, so lease expiry never depends on a Worker's wall clock.
 * A fragment, so each statement writes `${at(sql, now)}` instead of repeating the coalesce.
 */
export function at(sql: Queryable, now: Date | undefined | null) {
  return sql`coalesce(${now ?? null}::timestamptz, now())`;
}
