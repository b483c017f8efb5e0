import { cloudflareTest } from '@cloudflare/vitest-plugin';
import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';

/** A project of tests inside workerd, on wrangler.toml's bindings (Hyperdrive pointed at `database`). */
function workerProject(options: { name: string; include: string[]; database: 'adminDatabaseUrl' | 'clockDatabaseUrl'; vars: Record<string, string> }): TestProjectInlineConfiguration {
  return {
    plugins: [
      cloudflareTest(({ inject }) => ({
        wrangler: { configPath: './wrangler.toml' },
        miniflare: {
          hyperdrives: { HYPERDRIVE: inject(options.database) },
          bindings: {
            TEST_ADMIN_DATABASE_URL: inject('adminDatabaseUrl'),
            TEST_TEMPLATE_DATABASE: inject('templateDatabase'),
            TEST_SANDBOX_URL: inject('sandboxUrl'),
            ADMIN_TOKEN: 'test-admin-token-0123456789abcdef0123',
            ENQUEUE_TOKEN: 'test-enqueue-token-0123456789abcdef01',
            METRICS_TOKEN: 'test-metrics-token-0123456789abcdef01',
            SESSION_SECRET: 'test-session-secret-0123456789abcdef',
            LOG_STEPS: 'false',
            ...options.vars,
          },
        },
      })),
    ],
    test: { name: options.name, include: options.include, testTimeout: 60_000, hookTimeout: 60_000 },
  };
}

// One Postgres for the run (embedded, or DATABASE_URL), started by the global setup and shared by
// the projects: Node tests (engine, jobs, scripts, e2e), and Worker and clock tests inside workerd.
export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      {
        test: {
          name: 'node',
          include: ['test/engine/**/*.test.ts', 'test/jobs/**/*.test.ts', 'test/scripts/**/*.test.ts', 'test/e2e/**/*.test.ts', 'test/docs/**/*.test.ts'],
          environment: 'node',
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      workerProject({
        name: 'worker',
        include: ['test/worker/**/*.test.ts'],
        // Each file clones its own database and points HYPERDRIVE at it; this binding is only the
        // default the config needs. The dispatchers would connect through it, not through a
        // file's override, so here the Worker runs without them (the tick and the kicks keep
        // time, as with DISPATCH_SHARDS = 0); test/clock/ runs them.
        database: 'adminDatabaseUrl',
        vars: { DISPATCH_SHARDS: '0' },
      }),
      workerProject({
        name: 'clock',
        include: ['test/clock/**/*.test.ts'],
        // The dispatchers' database is the binding's own: the files share it and keep apart by pool.
        database: 'clockDatabaseUrl',
        vars: {},
      }),
    ],
  },
});
