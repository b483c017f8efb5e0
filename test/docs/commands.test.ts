import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevStack, type DevStack } from '../support/dev-stack.ts';
import { commandBlocks, matchesShown, type DocBlock } from './doc-blocks.ts';

const run = promisify(execFile);

/**
 * Every shell block of README.md and docs/*.md that holds a curl or npm command is either run here
 * against the `npm start` stack (its output compared with the `text` block the doc shows after it,
 * `<placeholder>`s standing for ids and times) or listed below with why it cannot run here. A block
 * in neither list fails, and so does a listed block the docs no longer have.
 */
const RUN = [
  'README.md: T=$(cat .data/dev-token); W=http://127.0.0.1:8787 curl -s $W/healthz',
  `README.md: curl -s -X POST $W/v1/jobs -H "authorization: Bearer $T" -H 'content-type: application/json' -d '{"type":"uppercase","payload":{"text":"hi"}}'`,
  'README.md: curl -s "$W/v1/jobs?type=uppercase&limit=1" -H "authorization: Bearer $T"',
  `README.md: curl -s -X POST $W/v1/jobs -H "authorization: Bearer $T" -H 'content-type: application/json' -d '{"type":"uppercase","priority":5000}'`,
  'README.md: curl -s $W/openapi.json | head -c 32; echo',
  `docs/platform-jobs.md: curl -s -X POST $W/v1/jobs -H "authorization: Bearer $T" -H 'content-type: application/json' -d '{"type":"cleanup","payload":{"dryRun":true}}'`,
];

const NOT_RUN: Record<string, string> = {
  'README.md: npm install npm test # embedded Postgres by default; DATABASE_URL=postgres://… to use an existing server':
    'this test runs inside `npm test`, after `npm install`',
  'README.md: npm start': 'the stack this test starts is the one `npm start` starts (test/support/dev-stack.ts)',
  'docs/deploying.md: npm install npm start # PORT=8787 by default; SANDBOX_PORT to pin the sandbox': 'as README.md\'s `npm start`',
  'docs/engine.md: npm run migrate # apply pending migrations (safe to run concurrently) npm run worker # run jobs until SIGTERM/SIGINT (graceful) npm run work':
    'a synopsis of the CLI (`<…>` stands for ids and values); test/scripts/cli.test.ts and worker-signals.test.ts run each command',
  'docs/http-api.md: T=$(cat .data/dev-token); W=http://127.0.0.1:8787 curl -s -X POST $W/v1/jobs -H "authorization: Bearer $T" -H \'content-type: application/jso':
    'a cheat sheet: `<id>` is an id from an earlier answer; the enqueue, list and error calls are run from README.md\'s tour, every route by test/worker/api.test.ts',
  'docs/operations.md: npm run ops -- stuck npm run ops -- release-lease 3f6c… # hand a stuck job back to the queue npm run ops -- requeue 3f6c… # run a poison job':
    'ids of jobs that exist only in the example; test/scripts/ops.test.ts runs each ops command',
  'docs/operations.md: npm run ops -- depth | lease | running | stuck | inspect npm run ops -- requeue <id> | fail <id> --reason "…" | cancel <id> | release-lease ':
    'a synopsis (`|` separates alternatives); test/scripts/ops.test.ts runs each ops command',
  [`docs/platform-jobs.md: curl -s -X POST $W/v1/pushes -H "authorization: Bearer $T" -H 'content-type: application/json' -d '{"accountId":"acct-demo","serviceId":"svc`]:
    '`<job id>` is the id the push answers; test/e2e/dev-stack.test.ts pushes and reads the log on the same stack',
  [`docs/platform-jobs.md: curl -s -X POST $W/v1/databases -H "authorization: Bearer $T" -H 'content-type: application/json' -d '{"accountId":"acct-demo","serviceId":"`]:
    '`<cluster job id>`, `<sandbox>` and `<ip>` come from earlier answers; test/jobs/provision-*.test.ts run the flow on the sandbox',
  'docs/platform-jobs.md: curl -s "$W/__scheduled?cron=0+0+1+*+*"; curl -s "$W/__scheduled?cron=0+0+1+*+*" curl -s "$W/v1/jobs?type=invoice_account" -H "authorization':
    '`<sandbox>` is the sandbox URL npm start prints; test/jobs/billing-sandbox.test.ts runs the month-end run twice on the sandbox',
};

/** A list's entry cut like DocBlock.key (140 characters after the file name). */
const cut = (key: string) => key.slice(0, key.indexOf(': ') + 2 + 140);
const toRun = RUN.map(cut);
const notRun = new Map(Object.entries(NOT_RUN).map(([k, v]) => [cut(k), v]));
const blocks = commandBlocks();

describe('the commands in the docs', () => {
  it('are each run here or listed with the reason they cannot be', () => {
    const unchecked = blocks.filter((b) => !toRun.includes(b.key) && !notRun.has(b.key)).map((b) => b.key);
    expect(unchecked).toEqual([]);
    const keys = new Set(blocks.map((b) => b.key));
    expect([...toRun, ...notRun.keys()].filter((k) => !keys.has(k))).toEqual([]);
  });
});

describe('run against the npm start stack, they print what the docs say', () => {
  let stack: DevStack;
  let cwd = '';
  beforeAll(async () => {
    stack = await startDevStack();
    // the tour reads the dev token from .data/dev-token, relative to where it is run
    cwd = mkdtempSync(join(tmpdir(), 'starbase-docs-'));
    mkdirSync(join(cwd, '.data'));
    writeFileSync(join(cwd, '.data', 'dev-token'), stack.token, { mode: 0o600 });
  }, 150_000);
  afterAll(() => {
    if (cwd) rmSync(cwd, { recursive: true, force: true });
  });

  /**
   * The block as a script, on the stack's URL: the variables the README's tour sets (T, W; the docs
   * say theirs are set that way) and those earlier blocks of its own file set, then its lines.
   */
  function script(block: DocBlock): string {
    const earlier = blocks.slice(0, blocks.indexOf(block)).filter((b) => b.file === block.file || b.file === 'README.md');
    const assignments = earlier.flatMap((b) => b.text.split('\n').filter((l) => /^[A-Z]+=/.test(l)));
    return [...assignments, block.text].join('\n').replaceAll('http://127.0.0.1:8787', stack.baseUrl.replace(/\/$/, ''));
  }

  for (const key of toRun) {
    it(key, async () => {
      const block = blocks.find((b) => b.key === key);
      expect(block, `no block ${key}`).toBeDefined();
      let stdout = '';
      // a job the answer reports queued is done a moment later: what the doc shows may take a few tries
      for (let attempt = 0; attempt < 20; attempt++) {
        ({ stdout } = await run('bash', ['-eu', '-c', script(block!)], { cwd, encoding: 'utf8' }));
        if (!block!.output || matchesShown(block!.output, stdout)) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      // a block the doc shows no output for must at least not be refused
      if (!block!.output) expect(stdout).not.toMatch(/"error":/);
      if (block!.output) expect(stdout.trim(), `${key}\nshown:\n${block!.output}`).toSatisfy((out: string) => matchesShown(block!.output!, out));
    }, 30_000);
  }
});
