import postgres from 'postgres';

/** The one seam between the engine and Postgres: a postgres.js client or transaction. */
export type Sql = postgres.Sql<Record<string, never>>;
export type TransactionSql = postgres.TransactionSql<Record<string, never>>;
/** Anything that runs tagged-template queries: a client, or a transaction inside `sql.begin`. */
export type Queryable = Sql | TransactionSql;

export interface ConnectOptions {
  /** Connections in the pool. Workers allow 6 open connections per invocation, so keep it ≤ 5 there. */
  max?: number;
  /** Name shown in pg_stat_activity. */
  applicationName?: string;
  /** Hyperdrive runs in transaction mode: named prepared statements are not portable there. */
  prepare?: boolean;
}

export function connect(url: string, options: ConnectOptions = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    prepare: options.prepare ?? true,
    onnotice: () => {},
    connection: { application_name: options.applicationName ?? 'starbase-worker' },
  }) as unknown as Sql;
}
