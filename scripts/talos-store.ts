import { readFileSync } from 'node:fs';
import { connect } from '../queue/db.ts';
import { storeTalosMachineConfigs } from '../functions/platform/provisioning/talos.ts';
import { parseKeyRing } from '../functions/lib/secrets.ts';
import { databaseConnectionError, fail, parseCli, resolveDatabaseUrl, usageError } from './lib/cli.ts';

// `npm run talos:store -- controlplane.yaml worker.yaml`: seal the Talos machine configs that
// `talosctl gen config <cluster> https://<endpoint>:6443` wrote, with ENCRYPTION_KEYS (the same
// value as the Worker's secret), into platform.sealed_secrets for provision_cluster to read.
const USAGE = `usage: npm run talos:store -- controlplane.yaml worker.yaml
Seals the two Talos machine configs (\`talosctl gen config\` output) with ENCRYPTION_KEYS (the
Worker's secret) into platform.sealed_secrets, over DATABASE_URL or the \`npm start\` stack's
database.

  -h, --help  this help`;
const { positionals } = parseCli({ command: 'npm run talos:store', usage: USAGE, allowPositionals: true });
const [controlplanePath, workerPath] = positionals;
if (!controlplanePath || !workerPath || positionals.length > 2) usageError('npm run talos:store', 'give the two files: controlplane.yaml worker.yaml');
if (!process.env.ENCRYPTION_KEYS) fail('ENCRYPTION_KEYS is not set: use the same value as the Worker secret');
const read = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    fail(`cannot read ${path}: ${(error as Error).message}`);
  }
};
const configs = { controlplane: read(controlplanePath), worker: read(workerPath) };
const url = resolveDatabaseUrl();
const sql = connect(url, { max: 1 });
try {
  const ring = await parseKeyRing(process.env.ENCRYPTION_KEYS);
  const { kid } = await storeTalosMachineConfigs(sql, configs, ring);
  console.log(`stored the Talos machine configs, sealed with key ${kid}`);
} catch (error) {
  if (databaseConnectionError(error, url)) throw error; // one line, exit 1 (exitOnDatabaseError)
  fail((error as Error).message);
} finally {
  await sql.end();
}
