import { connect } from '../queue/db.ts';
import { migrate } from '../queue/migrate.ts';
import { resolveDatabaseUrl } from './lib/cli.ts';

// `npm run migrate`: apply pending migrations to DATABASE_URL.
const sql = connect(resolveDatabaseUrl(), { max: 1 });
try {
  const applied = await migrate(sql);
  console.log(applied.length ? `applied: ${applied.join(', ')}` : 'up to date');
} finally {
  await sql.end();
}
