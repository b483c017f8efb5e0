/**
 * Hyperdrive's local connection string must carry a user and a password (wrangler and miniflare
 * refuse one without); with trust auth, as on a local server, any password will do.
 */
export function withPassword(url: string): string {
  const u = new URL(url);
  if (!u.password) u.password = 'unused';
  if (!u.username) u.username = 'postgres';
  return u.toString();
}

/** The same server, another database. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
