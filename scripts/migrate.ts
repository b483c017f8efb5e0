import { connect } from '../queue/db.ts';
import { migrate, pendingMigrations } from '../queue/migrate.ts';
import { databaseLocation, parseCli, resolveDatabaseUrl } from './lib/cli.ts';

const USAGE = `usage: npm run migrate [-- --dry-run]
Applies the pending migrations (migrations/NNNN_*.sql), then each function file
(migrations/functions/*.sql) whose content changed, in one transaction under an advisory lock:
safe to run concurrently. Over DATABASE_URL, or the running \`npm start\` stack's database.

  --dry-run, --status  list what would apply (migrations, then changed function files);
                       changes nothing
  -h, --help           this help`;

// `npm run migrate`: apply pending migrations to DATABASE_URL (docs/engine.md, "Where the SQL lives").
const { values } = parseCli({
  command: 'npm run migrate',
  usage: USAGE,
  options: { 'dry-run': { type: 'boolean' }, status: { type: 'boolean' } },
});
const url = resolveDatabaseUrl();
const sql = connect(url, { max: 1, applicationName: 'starbase-worker migrate' });
try {
  if (values['dry-run'] || values.status) {
    const pending = await pendingMigrations(sql);
    const where = databaseLocation(url);
    if (pending.migrations.length + pending.functions.length === 0) {
      console.log(`up to date: nothing to apply on ${where}`);
    } else {
      console.log(`would apply on ${where}${pending.fresh ? ' (never migrated)' : ''}, nothing changed:`);
      if (pending.migrations.length) console.log(`  ${pending.migrations.length} migration(s):\n${pending.migrations.map((m) => `    ${m}\n`).join('')}`.trimEnd());
      if (pending.functions.length) {
        const why = pending.migrations.length ? ', every one: a migration runs' : ' whose content changed';
        console.log(`  ${pending.functions.length} function file(s)${why}:\n${pending.functions.map((f) => `    ${f}\n`).join('')}`.trimEnd());
      }
    }
  } else {
    const applied = await migrate(sql);
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'up to date');
  }
} finally {
  await sql.end();
}
