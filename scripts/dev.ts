import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fchmodSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { resolve } from 'node:path';
import { Cron } from 'croner';
import postgres from 'postgres';
import { connect } from '../queue/db.ts';
import { storeTalosMachineConfigs } from '../functions/platform/provisioning/talos.ts';
import { parseKeyRing } from '../functions/lib/secrets.ts';
import { createStripeClient } from '../functions/platform/billing/adapters/stripe-billing.ts';
import { migrate } from '../queue/migrate.ts';
import { SANDBOX_DEPOT_WEBHOOK_SECRET } from '../sandbox/depot-webhooks.ts';
import { allProviders } from '../sandbox/providers.ts';
import { SANDBOX_SPACES_KEYS, SANDBOX_SPACES_PATH, SANDBOX_SPACES_REGION } from '../sandbox/spaces-keys.ts';
import { startSandbox } from '../sandbox/server.ts';
import { freePort, startEmbeddedPostgres } from './embedded-postgres.ts';
import { DATA_DIR, databaseConnectionError, DEV_STACK_FILE, parseCli, PROJECT_ROOT, readDevStack } from './lib/cli.ts';
import { watchForStop } from './lib/lifecycle.ts';
import { withDatabase, withPassword } from './lib/database-url.ts';

/**
 * `npm start`: the whole worker locally on embedded defaults — a real Postgres (embedded, data
 * kept in .data/pg between runs; or DATABASE_URL), migrations, the sandbox providers, `wrangler
 * dev` (miniflare) with Hyperdrive pointed at the database, and a driver firing the wrangler.toml
 * crons on their schedule. Ctrl-C stops all of it.
 */
parseCli({
  command: 'npm start',
  usage: `usage: npm start
Runs the whole worker locally until Ctrl-C: an embedded Postgres (data in .data/pg; DATABASE_URL
to use your own), migrations, the sandbox providers, \`wrangler dev\` and the wrangler.toml crons.

  PORT=8787           the Worker's port
  SANDBOX_PORT        the sandbox's port (default: one the system picks)
  INSPECTOR_PORT      wrangler's devtools inspector (default: one the system picks)
  STARBASE_DATA_DIR   where its state and dev secrets live (default .data); one stack per folder
  LOG_ARCHIVE=spaces  archive build logs to the sandbox's Spaces instead of R2
  -h, --help          this help`,
});
const DATA = DATA_DIR;
mkdirSync(DATA, { recursive: true });
// As root, Postgres runs as the `postgres` user, which must be able to pass through to DATA/pg.
if (process.getuid?.() === 0) chmodSync(DATA, 0o711);
const port = Number(process.env.PORT ?? 8787);
const log = (msg: string) => console.log(`[dev] ${msg}`);
const cleanups: Array<() => Promise<void> | void> = [];
/** Files holding the running stack's secrets (the vars file, the stack file): removed first at any stop. */
const stackFiles: string[] = [];
const removeStackFiles = () => {
  for (const file of stackFiles.splice(0)) rmSync(file, { force: true });
};
let stopped: Promise<never> | undefined;

/**
 * One stop, however many ways it is asked for. Ctrl-C signals the whole process group (the dev
 * script, and npm, which forwards the signal again), an impatient operator presses it twice, and
 * wrangler may exit meanwhile: a second call waits for the first instead of exiting midway
 * through its cleanup, which left .data/dev.vars behind.
 */
function stop(code = 0): Promise<never> {
  stopped ??= (async () => {
    log('stopping…');
    removeStackFiles();
    for (const fn of cleanups.reverse()) await Promise.resolve(fn()).catch((e) => console.error(e));
    process.exit(code);
  })();
  return stopped;
}
// The signals, and the parent (npm) going away without forwarding one (lib/lifecycle.ts).
watchForStop({ onStop: () => void stop(0) });
process.on('uncaughtException', (error) => {
  console.error(error);
  void stop(1);
});
process.on('unhandledRejection', (error) => {
  console.error(error);
  void stop(1);
});
// Whatever ends the process from here on, those files do not outlive it (SIGKILL aside).
process.on('exit', removeStackFiles);
refuseSecondStack();

/**
 * A stack already running on this data folder would share its database, its wrangler storage and
 * its secret files (and stopping either removed the other's): say where it runs instead. The lock
 * is taken before anything starts, so a start while the other is still booting is refused too.
 */
function refuseSecondStack(): void {
  const lock = resolve(DATA, 'dev.lock');
  for (;;) {
    try {
      writeFileSync(lock, JSON.stringify({ pid: process.pid, port }), { flag: 'wx', mode: 0o600 });
      // released last, once Postgres and wrangler are down, so that a new start waits for them
      process.on('exit', () => rmSync(lock, { force: true }));
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    let other: { pid: number; port: number } | undefined;
    try {
      other = JSON.parse(readFileSync(lock, 'utf8')) as { pid: number; port: number };
      process.kill(other.pid, 0);
    } catch {
      rmSync(lock, { force: true }); // left by a stack that was killed: take it over
      continue;
    }
    const url = readDevStack()?.workerUrl ?? `http://127.0.0.1:${other.port} (still starting)`;
    console.error(`error: a stack is already running on ${DATA}: pid ${other.pid}, API ${url}.`);
    console.error('Stop it with Ctrl-C where it runs, or start another with its own STARBASE_DATA_DIR and PORT.');
    process.exit(1);
  }
}

/**
 * Writes a file only its owner can read, whatever was there before: `mode` applies only when a
 * file is created, so a file left 0644 by an older version is narrowed too.
 */
function writePrivate(file: string, text: string): void {
  const fd = openSync(file, 'w', 0o600);
  try {
    fchmodSync(fd, 0o600);
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

/**
 * A secret made once and kept in .data, so tokens and keys survive restarts; one too short for
 * today's minimum (32 characters: an older dev token had 28) is made anew.
 */
function devSecret(name: string, make: () => string): string {
  const file = `${DATA}/${name}`;
  if (existsSync(file)) {
    chmodSync(file, 0o600);
    const kept = readFileSync(file, 'utf8').trim();
    if (kept.length >= 32) return kept;
  }
  const value = make();
  writePrivate(file, value);
  return value;
}

/**
 * The vars and secrets as a dotenv file for `wrangler dev --env-file` (wrangler's .dev.vars
 * convention, in .data rather than beside wrangler.toml, where a developer's own .dev.vars may
 * live). Values are single-quoted (taken literally by dotenv) with `$` escaped (wrangler expands
 * `$NAME` in every value); a value dotenv cannot carry that way is refused.
 */
function devVarsFile(vars: Record<string, string>): string {
  return Object.entries(vars)
    .map(([name, raw]) => {
      const value = String(raw); // STARBASE_DEV_VARS is JSON: a number is passed as its text
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`dev var name ${JSON.stringify(name)}: letters, digits and _ only`);
      if (/['\r\n]|\\$/.test(value)) throw new Error(`dev var ${name}: a value with a quote, a line break or a trailing backslash cannot be passed to wrangler dev`);
      return `${name}='${value.replace(/\$/g, '\\$')}'\n`;
    })
    .join('');
}

try {
  // 1. Postgres
  let databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    log(`starting embedded Postgres (data in ${DATA}/pg)…`);
    const pg = await startEmbeddedPostgres({ dataDir: `${DATA}/pg`, persistent: true });
    cleanups.push(() => pg.stop());
    const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
    const [exists] = await admin`select 1 from pg_database where datname = 'starbase'`;
    if (!exists) await admin.unsafe('create database starbase');
    await admin.end();
    databaseUrl = withDatabase(pg.url, 'starbase');
  }
  const sql = connect(databaseUrl, { max: 1 });
  const applied = await migrate(sql);
  await sql.end();
  log(applied.length ? `migrated: ${applied.join(', ')}` : 'database up to date');

  // 2. The sandbox providers (Depot, DigitalOcean, Stripe, Spaces)
  const sandbox = await startSandbox({ port: Number(process.env.SANDBOX_PORT ?? (await freePort())), providers: allProviders() });
  cleanups.push(() => sandbox.close());
  log(`sandbox providers on ${sandbox.url}`);

  // 3. wrangler dev
  const token = devSecret('dev-token', () => `dev_${randomBytes(24).toString('base64url')}`);
  const encryptionKeys = devSecret('encryption-keys', () => `dev1:${randomBytes(32).toString('base64')}`);
  const sessionSecret = devSecret('session-secret', () => randomBytes(32).toString('base64url'));
  await seedDevData(databaseUrl, encryptionKeys, sandbox.url);
  const vars: Record<string, string> = {
    ADMIN_TOKEN: token,
    SESSION_SECRET: sessionSecret,
    ...sandboxVars(sandbox.url),
    ENCRYPTION_KEYS: encryptionKeys,
    TALOS_IMAGE: 'talos-sandbox',
    // the sandbox brings resources up after a few polls: poll every 2 s so a demo takes seconds
    PROVISION_POLL_INTERVAL_MS: '2000',
    KUBERNETES_VERSION_URL: `${sandbox.url}/kube/{endpoint}/version`,
    ...JSON.parse(process.env.STARBASE_DEV_VARS ?? '{}'),
  };
  // Secrets go to wrangler in a file only we can read, never on its command line (`--var` put every
  // one in `ps` for any user of the machine to see).
  const devVars = resolve(DATA, 'dev.vars');
  stackFiles.push(devVars);
  writePrivate(devVars, devVarsFile(vars));
  // wrangler writes a debug log of everything it and the Worker print — step log lines included,
  // with whatever text a failing step produced — to ~/.config/.wrangler/logs, world-readable, and
  // keeps it. None unless WRANGLER_WRITE_LOGS asks for one, and then in .data, readable by us only.
  // (What each job did is in the database: its events, last error, the dashboard.)
  const writeLogs = process.env.WRANGLER_WRITE_LOGS ?? 'false';
  const logDir = resolve(DATA, 'wrangler-logs');
  if (!['false', '0'].includes(writeLogs.toLowerCase())) {
    mkdirSync(logDir, { recursive: true, mode: 0o700 });
    chmodSync(logDir, 0o700);
  }
  const wrangler = spawn(
    process.execPath,
    [
      `${PROJECT_ROOT}node_modules/wrangler/bin/wrangler.js`, 'dev', '--port', String(port), '--ip', '127.0.0.1',
      // wrangler's default inspector port is 9229 if it looks free when asked, bound later: two
      // stacks starting at once both took it and one died (address in use). 0 binds a port the
      // system picks, whoever else starts.
      '--inspector-port', process.env.INSPECTOR_PORT ?? '0',
      '--test-scheduled', '--persist-to', `${DATA}/wrangler`, '--show-interactive-dev-session=false', '--log-level', 'warn',
      '--env-file', devVars,
    ],
    {
      cwd: PROJECT_ROOT,
      detached: true, // its own process group, so Ctrl-C takes workerd down with it
      stdio: ['ignore', 'inherit', 'inherit'],
      env: {
        ...process.env,
        WRANGLER_SEND_METRICS: 'false',
        WRANGLER_WRITE_LOGS: writeLogs,
        WRANGLER_LOG_PATH: process.env.WRANGLER_LOG_PATH ?? logDir,
        CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE: withPassword(databaseUrl),
      },
    },
  );
  cleanups.push(() => killGroup(wrangler));
  wrangler.on('exit', (code) => {
    if (!stopped) {
      log(`wrangler dev exited (${code})`);
      void stop(1);
    }
  });
  const workerUrl = `http://127.0.0.1:${port}`;
  await waitForHealth(workerUrl);
  // the sandbox Depot's build-finished webhooks go to this Worker, signed with the secret it was given
  await fetch(`${sandbox.url}/_sandbox/depot/webhook`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${workerUrl}/webhooks/depot`, secret: SANDBOX_DEPOT_WEBHOOK_SECRET }),
  });

  // 4. The cron driver: fire each wrangler.toml cron at its minute, like Cron Triggers do.
  const crons = readCrons();
  const timer = startCronDriver(workerUrl, crons);
  cleanups.push(() => clearTimeout(timer.current));

  // it holds the admin token and the database URL: readable by us only
  stackFiles.push(DEV_STACK_FILE);
  writePrivate(DEV_STACK_FILE, JSON.stringify({ databaseUrl, workerUrl, sandboxUrl: sandbox.url, token, pid: process.pid }, null, 2));

  console.log(`
  starbase-worker is running

    API         ${workerUrl}
    dashboard   ${workerUrl}/
    dev token   ${token}
    database    ${databaseUrl.replace(/:[^:@/]+@/, ':***@')}
    sandbox     ${sandbox.url}
    build logs  ${vars.LOG_ARCHIVE === 'spaces' ? `Spaces, the sandbox's bucket ${vars.SPACES_BUCKET} (${sandbox.url}/_sandbox/spaces/objects)` : 'R2 (miniflare, in .data/wrangler)'}
    crons       ${crons.join('  |  ')}

  try:
    curl -s -X POST ${workerUrl}/v1/jobs -H 'authorization: Bearer ${token}' \\
         -H 'content-type: application/json' -d '{"type":"uppercase","payload":{"text":"hi"}}'

  Ctrl-C stops everything.
`);
} catch (error) {
  // a database that cannot be reached is one line; anything else is a bug to read in full
  const unreachable = process.env.DATABASE_URL ? databaseConnectionError(error, process.env.DATABASE_URL) : null;
  console.error(unreachable ? `error: ${unreachable}` : error);
  await stop(1);
}

/**
 * Demo data for the local stack: Talos machine configs (placeholders the sandbox accepts: a real
 * deployment stores `talosctl gen config` output with `npm run talos:store`) and a demo service,
 * so every job type can be tried with curl at once. Idempotent.
 */
async function seedDevData(databaseUrl: string, encryptionKeys: string, sandboxUrl: string): Promise<void> {
  const sql = connect(databaseUrl, { max: 1 });
  try {
    await seedDemoBilling(sql, sandboxUrl);
    const [stored] = await sql`select 1 from platform.sealed_secrets where name = 'talos_machine_configs'`;
    if (!stored) {
      const demo = (type: string) => `version: v1alpha1\nmachine:\n  type: ${type}\n  token: sandbox-join-token\ncluster:\n  clusterName: demo\n`;
      await storeTalosMachineConfigs(sql, { controlplane: demo('controlplane'), worker: demo('worker') }, await parseKeyRing(encryptionKeys));
    }
    await sql`insert into platform.services (id, account_id) values ('svc-demo', 'acct-demo') on conflict do nothing`;
  } finally {
    await sql.end();
  }
}

/**
 * Two demo accounts on a plan, with usage in the last three months, and Stripe customers in the
 * sandbox (its state lives in memory, so customers are made afresh on every start), so the
 * month-end cron can be fired by hand and its invoices seen in the sandbox.
 */
async function seedDemoBilling(sql: ReturnType<typeof connect>, sandboxUrl: string): Promise<void> {
  const stripe = createStripeClient({ secretKey: 'sk_test_sandbox', apiBase: sandboxUrl });
  await sql`insert into platform.plans (id, name, monthly_price_cents, included_credit_cents)
            values ('starter', 'Starter', 2000, 500) on conflict do nothing`;
  for (const [account, usageCents] of [['acct-demo', 1234], ['acct-demo-2', 300]] as const) {
    const customer = await stripe.customers.create({ name: account, metadata: { starbase_account: account } });
    const [exists] = await sql`select 1 from platform.accounts where id = ${account}`;
    if (!exists) await sql`select platform.create_account(${account}, 'starter', ${customer.id}, '2026-01-01'::timestamptz)`;
    else await sql`update platform.accounts set stripe_customer_id = ${customer.id} where id = ${account}`;
    for (let back = 1; back <= 3; back++) {
      await sql`insert into platform.usage_totals (account_id, period, metric, quantity, cents)
                values (${account}, platform.period_of(now() - make_interval(months => ${back})), 'bandwidth_gb', ${usageCents / 10}, ${usageCents})
                on conflict do nothing`;
    }
  }
}

function sandboxVars(url: string): Record<string, string> {
  const u = new URL(url);
  return {
    DEPOT_API_URL: url,
    DEPOT_TOKEN: 'sandbox-depot-token',
    DEPOT_PROJECT_ID: 'starbase-dev',
    DEPOT_WEBHOOK_SECRET: SANDBOX_DEPOT_WEBHOOK_SECRET,
    DIGITALOCEAN_API_URL: url,
    DIGITALOCEAN_TOKEN: 'sandbox-do-token',
    STRIPE_SECRET_KEY: 'sk_test_sandbox',
    STRIPE_API_HOST: u.hostname,
    STRIPE_API_PORT: u.port,
    STRIPE_API_PROTOCOL: u.protocol.replace(':', ''),
    STRIPE_WEBHOOK_SECRET: 'whsec_sandbox_dev',
    // used when LOG_ARCHIVE=spaces (`LOG_ARCHIVE=spaces npm start`): the sandbox's Spaces, its dev key pair
    ...(process.env.LOG_ARCHIVE ? { LOG_ARCHIVE: process.env.LOG_ARCHIVE } : {}),
    SPACES_ENDPOINT: `${url}${SANDBOX_SPACES_PATH}`,
    SPACES_BUCKET: 'starbase-dev-build-logs',
    SPACES_REGION: SANDBOX_SPACES_REGION,
    SPACES_ACCESS_KEY_ID: SANDBOX_SPACES_KEYS.accessKeyId,
    SPACES_SECRET_ACCESS_KEY: SANDBOX_SPACES_KEYS.secretAccessKey,
  };
}

function readCrons(): string[] {
  const toml = readFileSync(`${PROJECT_ROOT}wrangler.toml`, 'utf8');
  const line = /^crons\s*=\s*\[(.*)\]/m.exec(toml);
  return line ? [...line[1]!.matchAll(/"([^"]+)"/g)].map((m) => m[1]!) : [];
}

function startCronDriver(workerUrl: string, crons: string[]): { current: NodeJS.Timeout | undefined } {
  const handle: { current: NodeJS.Timeout | undefined } = { current: undefined };
  const schedule = () => {
    const next = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 60_000);
    handle.current = setTimeout(async () => {
      for (const cron of crons) {
        if (!new Cron(cron, { timezone: 'UTC', paused: true }).match(next)) continue;
        try {
          const res = await fetch(`${workerUrl}/__scheduled?cron=${encodeURIComponent(cron)}`);
          if (!res.ok) log(`cron ${cron}: HTTP ${res.status}`);
        } catch (error) {
          log(`cron ${cron}: ${(error as Error).message}`);
        }
      }
      schedule();
    }, next.getTime() - Date.now());
  };
  schedule();
  return handle;
}

async function waitForHealth(url: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`the worker did not become healthy at ${url}/healthz within 2 minutes`);
}

function killGroup(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    // a child killed by a signal has no exit code, only its signal
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return resolve();
    child.once('exit', () => resolve());
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      return resolve();
    }
    setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }, 5000).unref();
  });
}
