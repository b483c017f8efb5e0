import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { launchDevStack, type LaunchedDevStack } from '../../scripts/lib/dev-stack.ts';
import { createTestDatabase } from './db.ts';

export interface DevStack extends LaunchedDevStack {
  databaseUrl: string;
}

/**
 * Stacks this test file started, stopped after its tests. Test files call startDevStack inside
 * beforeAll, where vitest silently ignores a new afterAll (the stack, wrangler and workerd were
 * left running): this hook is registered when the file imports this module, during collection.
 */
const started: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
}, 40_000);

/**
 * Boots the `npm start` stack (migrations, sandbox, wrangler dev, cron driver) on this file's
 * test database, with a temporary STARBASE_DATA_DIR, and stops it after the file's tests.
 */
export async function startDevStack(options: { env?: Record<string, string> } = {}): Promise<DevStack> {
  const db = await createTestDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'starbase-e2e-'));
  const launch = launchDevStack({ databaseUrl: db.url, dataDir, env: options.env });
  // The file's afterAll can run while a launch is still under way (a sibling launch failed):
  // it waits for this one to finish booting, then stops it.
  started.push(async () => {
    const stack: LaunchedDevStack | undefined = await launch.catch(() => undefined);
    await stack?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const stack = await launch;
  return { ...stack, databaseUrl: db.url };
}
