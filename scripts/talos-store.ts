import { readFileSync } from 'node:fs';
import { connect } from '../queue/db.ts';
import { storeTalosMachineConfigs } from '../functions/platform/provisioning/talos.ts';
import { parseKeyRing } from '../functions/lib/secrets.ts';
import { fail, resolveDatabaseUrl } from './lib/cli.ts';

// `npm run talos:store -- controlplane.yaml worker.yaml`: seal the Talos machine configs that
// `talosctl gen config <cluster> https://<endpoint>:6443` wrote, with ENCRYPTION_KEYS (the same
// value as the Worker's secret), into platform.sealed_secrets for provision_cluster to read.
const [controlplanePath, workerPath] = process.argv.slice(2);
if (!controlplanePath || !workerPath) fail('usage: npm run talos:store -- controlplane.yaml worker.yaml');
if (!process.env.ENCRYPTION_KEYS) fail('ENCRYPTION_KEYS is not set: use the same value as the Worker secret');
const read = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    fail(`cannot read ${path}: ${(error as Error).message}`);
  }
};
const configs = { controlplane: read(controlplanePath), worker: read(workerPath) };
const sql = connect(resolveDatabaseUrl(), { max: 1 });
try {
  const ring = await parseKeyRing(process.env.ENCRYPTION_KEYS);
  const { kid } = await storeTalosMachineConfigs(sql, configs, ring);
  console.log(`stored the Talos machine configs, sealed with key ${kid}`);
} catch (error) {
  fail((error as Error).message);
} finally {
  await sql.end();
}
