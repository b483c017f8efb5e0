import { cloudflareTest } from '@cloudflare/vitest-plugin';
import { defineConfig } from 'vitest/config';

// One Postgres for the run (embedded, or DATABASE_URL), started by the global setup and shared by
// both projects: Node tests (engine, jobs, scripts, e2e) and Worker tests inside workerd.
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
      {
        plugins: [
          cloudflareTest(({ inject }) => ({
            wrangler: { configPath: './wrangler.toml' },
            miniflare: {
              // Each test file clones its own database and points HYPERDRIVE at it; this binding
              // is only the default the config needs.
              hyperdrives: { HYPERDRIVE: inject('adminDatabaseUrl') },
              bindings: {
                TEST_ADMIN_DATABASE_URL: inject('adminDatabaseUrl'),
                TEST_TEMPLATE_DATABASE: inject('templateDatabase'),
                TEST_SANDBOX_URL: inject('sandboxUrl'),
                ADMIN_TOKEN: 'test-admin-token-0123456789abcdef0123',
                ENQUEUE_TOKEN: 'test-enqueue-token-0123456789abcdef01',
                METRICS_TOKEN: 'test-metrics-token-0123456789abcdef01',
                SESSION_SECRET: 'test-session-secret-0123456789abcdef',
                LOG_STEPS: 'false',
              },
            },
          })),
        ],
        test: {
          name: 'worker',
          include: ['test/worker/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
