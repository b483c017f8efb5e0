import { afterAll } from 'vitest';
import { allProviders } from '../../sandbox/providers.ts';
import { startSandbox, type SandboxHandle } from '../../sandbox/server.ts';

/**
 * Sandboxes this test file started, closed after its tests. Files call createTestSandbox inside
 * beforeAll, where vitest ignores a new afterAll (the servers were never closed): this hook is
 * registered when the file imports this module, during collection.
 */
const started: SandboxHandle[] = [];
afterAll(async () => {
  for (const sandbox of started.splice(0).reverse()) await sandbox.close();
});

/** A sandbox server (all providers) for this test file, closed after it. */
export async function createTestSandbox(): Promise<SandboxHandle> {
  const sandbox = await startSandbox({ providers: allProviders() });
  started.push(sandbox);
  return sandbox;
}
