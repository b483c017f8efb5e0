import { createApp } from './app.ts';
import type { WorkerEnv } from './config.ts';
import { scheduled } from './cron.ts';
import { entryUsage } from './invocation.ts';
import { withUsage } from './usage.ts';

// wrangler.toml binds the Durable Object by this class name, exported from the main module
export { BuildLogRelay } from './platform/build/adapters/build-log-relay.ts';
export { Dispatcher } from './dispatch/dispatcher.ts';

const app = createApp();

export default {
  // each invocation counts what it spends of the platform's limits from its first statement
  fetch: (request, env, ctx) => withUsage(entryUsage(env), async () => app.fetch(request, env, ctx)),
  scheduled: (controller, env) => withUsage(entryUsage(env), () => scheduled(controller, env)),
} satisfies ExportedHandler<WorkerEnv>;
