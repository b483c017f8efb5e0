import { createApp } from './app.ts';
import type { WorkerEnv } from './config.ts';
import { scheduled } from './cron.ts';

// wrangler.toml binds the Durable Object by this class name, exported from the main module
export { BuildLogRelay } from './platform/build/adapters/build-log-relay.ts';

const app = createApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
  scheduled: (controller, env) => scheduled(controller, env),
} satisfies ExportedHandler<WorkerEnv>;
