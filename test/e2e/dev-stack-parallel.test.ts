import { describe, expect, it } from 'vitest';
import { startDevStack } from '../support/dev-stack.ts';

/**
 * Two `npm start` stacks starting at the same moment on one machine (as parallel test files do)
 * each come up: no port either takes is one the other was told was free.
 */
describe('two npm start stacks at once', () => {
  it('both boot and answer', async () => {
    const stacks = await Promise.all([startDevStack(), startDevStack()]);
    for (const stack of stacks) expect((await stack.api('/healthz')).status).toBe(200);
    expect(new Set(stacks.map((s) => s.baseUrl)).size).toBe(2);
  }, 120_000);
});
