import { afterAll } from 'vitest';
import { allProviders } from '../../sandbox/providers.ts';
import { startSandbox, type SandboxHandle } from '../../sandbox/server.ts';

/** A sandbox server (all providers) for this test file, closed after it. */
export async function createTestSandbox(): Promise<SandboxHandle> {
  const sandbox = await startSandbox({ providers: allProviders() });
  afterAll(() => sandbox.close());
  return sandbox;
}
