import { readdirSync, readFileSync } from 'node:fs';
import { cloudflareTest } from '@cloudflare/vitest-plugin';
import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { inPostgresMatrix } from './scripts/lib/test-matrix.ts';

/**
 * The Postgres matrix (`npm run test:pg15`, `npm run test:pg18`) runs only the files that say why
 * they must pass on every major, in a line `Postgres matrix: <reason>` near their top: the
 * concurrency core (claims, leases, flow control, signals, children, bulk, deadlines, the model and
 * chaos tests, migrations) and the few files that test what differs between majors. Every other
 * file runs once, on `npm test`'s Postgres.
 */
const matrixOnly = process.env.STARBASE_TEST_MATRIX === '1';

function testFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => `${dir}/${f}`);
}

/** A project's files: every test file under `dirs`, or in the matrix only those that carry the mark. */
function include(dirs: string[]): string[] {
  if (!matrixOnly) return dirs.map((d) => `${d}/**/*.test.ts`);
  return dirs.flatMap(testFiles).filter((f) => inPostgresMatrix(readFileSync(f, 'utf8')));
}

/** A project of tests inside workerd, on wrangler.toml's bindings (Hyperdrive pointed at `database`). */
function workerProject(options: { name: string; dirs: string[]; database: 'adminDatabaseUrl' | 'clockDatabaseUrl'; vars: Record<string, string> }): TestProjectInlineConfiguration {
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
    test: { name: options.name, include: include(options.dirs), testTimeout: 60_000, hookTimeout: 60_000 },
  };
}

function nodeProject(name: string, dirs: string[]): TestProjectInlineConfiguration {
  return { test: { name, include: include(dirs), environment: 'node', testTimeout: 60_000, hookTimeout: 60_000 } };
}

/**
 * Vitest queues the files by project name (clock, engine, stack, worker) and hands each to the
 * next free worker. The stack's files are the longest (the docs' commands and the dashboard's
 * browser test take about 30 s each) and were the tail of the run: they go first, and the many
 * short Worker files fill the workers at the end.
 */
const PROJECT_ORDER = ['stack', 'engine', 'clock', 'worker'];
class StackFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => PROJECT_ORDER.indexOf(f.project.name);
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

// One Postgres for the run (embedded, or DATABASE_URL), started by the global setup and shared by
// the projects. Files run four at a time on two cores: most of a file's time is spent waiting on
// Postgres, workerd, a browser or a child process (docs/engine.md, "Tests", has the measurements).
export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 4,
    sequence: { sequencer: StackFirstSequencer },
    projects: [
      // The engine, the job types against the sandbox, the CLI and scripts: Node, each file in its
      // own database.
      nodeProject('engine', ['test/engine', 'test/jobs', 'test/scripts']),
      // What boots `npm start`'s stack or a browser, and the docs' commands run as a reader would.
      nodeProject('stack', ['test/e2e', 'test/docs']),
      workerProject({
        name: 'worker',
        dirs: ['test/worker'],
        // Each file clones its own database and points HYPERDRIVE at it; this binding is only the
        // default the config needs. The dispatchers would connect through it, not through a
        // file's override, so here the Worker runs without them (the tick and the kicks keep
        // time, as with DISPATCH_SHARDS = 0); test/clock/ runs them.
        database: 'adminDatabaseUrl',
        vars: { DISPATCH_SHARDS: '0' },
      }),
      workerProject({
        name: 'clock',
        dirs: ['test/clock'],
        // The dispatchers' database is the binding's own: the files share it and keep apart by pool.
        database: 'clockDatabaseUrl',
        vars: {},
      }),
    ],
  },
});
