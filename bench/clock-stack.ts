import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as Engine from '../queue/index.ts';
import { PROJECT_ROOT } from '../scripts/lib/cli.ts';
import type * as DevStack from '../scripts/lib/dev-stack.ts';
import type { Stack } from './e2e-stack.ts';
import { stopInTurn } from './interrupt.ts';
import type { BenchServer } from './server.ts';

/**
 * One `npm start` stack of one tree (this one, or a base commit's checkout) on its own fresh
 * database. Each tree is launched and written to through its own code — its scripts/lib/dev-stack.ts
 * and its engine (queue/) — so a base whose schema or starter differs is measured as it is.
 */
export interface ClockStack extends Stack {
  label: 'current' | 'base';
  commit: string;
  /** The stack's database name (its row in pg_stat_database). */
  database: string;
  sandboxUrl: string;
  /** The adminToken's bearer header, for the admin routes. */
  token: string;
  engine: Pick<typeof Engine, 'enqueue' | 'getJob'>;
  /** Stops the stack (as Ctrl-C does), closes the probe, drops the database; safe to call twice. */
  stop(): Promise<void>;
}

/** Latest output kept from each stack (wrangler dev runs at --log-level warn). */
const OUTPUT_LIMIT = 100_000;

const load = async <T>(root: string, path: string): Promise<T> => (await import(pathToFileURL(`${root}${path}`).href)) as T;

export async function launchClockStack(
  server: BenchServer,
  tree: { label: 'current' | 'base'; root: string; commit: string },
): Promise<ClockStack> {
  const devStack = await load<typeof DevStack>(tree.root, 'scripts/lib/dev-stack.ts').catch((error: Error) => {
    throw new Error(`${tree.label} ${tree.commit}: cannot load its scripts/lib/dev-stack.ts (${error.message})`);
  });
  const engine = await load<typeof Engine>(tree.root, 'queue/index.ts');
  const db = await server.freshDatabase(`clock_${tree.label}`);
  const dataDir = mkdtempSync(join(tmpdir(), `starbase-bench-clock-${tree.label}-`));
  let launched: DevStack.LaunchedDevStack | undefined;
  let probe: Engine.Sql | undefined;
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await stopInTurn([() => launched?.stop(), () => probe?.end({ timeout: 5 }), () => db.drop(), () => rmSync(dataDir, { recursive: true, force: true })]);
  };
  try {
    const launch = () => devStack.launchDevStack({ databaseUrl: db.url, dataDir, outputLimit: OUTPUT_LIMIT });
    // another wrangler dev starting on this machine at the same moment may take the same inspector port: once more
    launched = await launch().catch((error: Error) => {
      if (!/Address already in use/.test(error.message)) throw error;
      console.log(`  ${tree.label}: a port was taken while wrangler dev started; starting it again`);
      return launch();
    });
    probe = engine.connect(db.url, { max: 2 });
    const info = JSON.parse(readFileSync(join(dataDir, 'dev-stack.json'), 'utf8')) as { sandboxUrl: string };
    return {
      label: tree.label,
      commit: tree.commit,
      database: new URL(db.url).pathname.slice(1),
      sandboxUrl: info.sandboxUrl,
      token: launched.token,
      api: launched.api,
      baseUrl: launched.baseUrl,
      probe,
      rootPid: launched.child.pid!,
      postmaster: server.postmaster,
      engine,
      stop,
    };
  } catch (error) {
    if (launched) console.error(launched.output().slice(-5_000));
    await stop();
    throw error;
  }
}

/** This tree, as launchClockStack takes it. */
export const currentTree = (commit: string) => ({ label: 'current' as const, root: PROJECT_ROOT, commit });
