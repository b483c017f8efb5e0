import { createDepotSandbox } from './depot.ts';
import { digitalOceanSandbox } from './digitalocean.ts';
import type { SandboxProvider } from './server.ts';
import { spacesSandbox } from './spaces.ts';
import { stripeSandbox } from './stripe.ts';

/** Every provider the sandbox speaks. Each call returns fresh state. */
export function allProviders(): SandboxProvider[] {
  return [createDepotSandbox(), digitalOceanSandbox(), stripeSandbox(), spacesSandbox()];
}
