import type { Sql } from '../../queue/db.ts';

/**
 * Whether the server could give `wanted` connections to a role like ours: `max_connections` less
 * the slots it keeps for superusers (`superuser_reserved_connections`) and, from Postgres 16, for
 * `pg_use_reserved_connections` (`reserved_connections`). Returns why not, or null. Connections
 * other clients hold are not counted: they come and go, and a worker short of a connection waits
 * for one (the pool queues the query) rather than failing.
 */
export async function connectionLimitError(sql: Sql, wanted: number): Promise<string | null> {
  const [row] = await sql<{ max: number; superuser: number; reserved: number }[]>`
    select current_setting('max_connections')::int as max,
           current_setting('superuser_reserved_connections')::int as superuser,
           coalesce(current_setting('reserved_connections', true), '0')::int as reserved`;
  const { max, superuser, reserved } = row!;
  const usable = max - superuser - reserved;
  if (wanted <= usable) return null;
  return (
    `--connections ${wanted} is more than the server allows: max_connections ${max} less ` +
    `${superuser + reserved} reserved (superuser_reserved_connections ${superuser}${reserved ? `, reserved_connections ${reserved}` : ''}) ` +
    `leaves ${usable}`
  );
}
