import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
  "README.md: T=$(cat .data/dev-token); W=http://127.0.0.1:8787 curl -s $W/healthz",
  "README.md: curl -s -X POST $W/v1/jobs -H \"authorization: Bearer $T\" -H 'content-type: application/json' -d '{\"type\":\"uppercase\",\"payload\":{\"text\":\"hi\"}",
  "README.md: curl -s \"$W/v1/jobs?type=uppercase&limit=1\" -H \"authorization: Bearer $T\"",
  "README.md: curl -s -X POST $W/v1/jobs -H \"authorization: Bearer $T\" -H 'content-type: application/json' -d '{\"type\":\"uppercase\",\"priority\":5000}'",
  "README.md: curl -s $W/openapi.json | head -c 32; echo",
  "docs/http-api.md: T=$(cat .data/dev-token); W=http://127.0.0.1:8787 curl -s -X POST $W/v1/jobs -H \"authorization: Bearer $T\" -H 'content-type: application/jso",
  "docs/http-api.md: curl -s -X POST $W/v1/jobs -H \"authorization: Bearer $T\" -H 'content-type: application/json' -d '{\"type\":\"countdown\",\"payload\":{\"n\":30,\"dela",
  "docs/http-api.md: J=$(curl -s -X POST $W/v1/jobs -H \"authorization: Bearer $T\" -H 'content-type: application/json' -d '{\"type\":\"countdown\",\"payload\":{\"n\":30,\"",
  "docs/http-api.md: curl -s \"$W/v1/jobs?type=countdown&limit=1\" -H \"authorization: Bearer $T\"",
  "docs/http-api.md: curl -s -X POST $W/v1/jobs/$J/cancel -H \"authorization: Bearer $T\" -H 'content-type: application/json' -d '{\"reason\":\"not needed\"}'",
  "docs/http-api.md: curl -s $W/metrics -H \"authorization: Bearer $T\" | head -n 2",
  "docs/platform-jobs.md: S=$(grep -o '\"sandboxUrl\": \"[^\"]*\"' .data/dev-stack.json | cut -d'\"' -f4) curl -s -X POST $S/_sandbox/depot/script -H 'content-type: applica",
  "docs/platform-jobs.md: B=$(curl -s -X POST $W/v1/pushes -H \"authorization: Bearer $T\" -H 'content-type: application/json' -d '{\"accountId\":\"acct-demo\",\"serviceId\":",
  "docs/platform-jobs.md: curl -s $W/v1/builds/$B/logs -H \"authorization: Bearer $T\" | head -n 2",
  "docs/platform-jobs.md: curl -s \"$S/_sandbox/depot/webhooks\" | grep -o '\"answer\":{\"status\":[0-9]*}' | sort | uniq -c",
  "docs/platform-jobs.md: curl -s -X POST $W/v1/databases -H \"authorization: Bearer $T\" -H 'content-type: application/json' -d '{\"accountId\":\"acct-demo\",\"serviceId\":\"",
  "docs/platform-jobs.md: C=$(curl -s -X POST $W/v1/clusters -H \"authorization: Bearer $T\" -H 'content-type: application/json' -d '{\"accountId\":\"acct-demo\",\"name\":\"pr",
  "docs/platform-jobs.md: curl -s $W/v1/jobs/$C -H \"authorization: Bearer $T\" | grep -o 'talosctl bootstrap[^\"]*'",
  "docs/platform-jobs.md: IP=$(curl -s $W/v1/jobs/$C -H \"authorization: Bearer $T\" | grep -o 'bootstrap --nodes [0-9.]*' | cut -d' ' -f3) curl -s -X POST $S/_sandbox/",
  "docs/platform-jobs.md: curl -s \"$W/__scheduled?cron=0+0+1+*+*\"; echo; curl -s \"$W/__scheduled?cron=0+0+1+*+*\"; echo",
  "docs/platform-jobs.md: curl -s \"$W/v1/jobs?type=invoice_account\" -H \"authorization: Bearer $T\" | grep -o '\"status\":\"[a-z]*\"' | sort | uniq -c curl -s \"$S/_sandbox/",
  "docs/platform-jobs.md: curl -s -X POST $W/v1/jobs -H \"authorization: Bearer $T\" -H 'content-type: application/json' -d '{\"type\":\"cleanup\",\"payload\":{\"dryRun\":true}",
];

const NOT_RUN: Record<string, string> = {
  'README.md: npm install npm test # embedded Postgres by default; DATABASE_URL=postgres://… to use an existing server':
    'this test runs inside `npm test`, after `npm install`',
  'README.md: npm start': 'the stack this test starts is the one `npm start` starts (test/support/dev-stack.ts)',
  'docs/deploying.md: npm install npm start # PORT=8787 by default; SANDBOX_PORT to pin the sandbox': 'as README.md\'s `npm start`',
  'docs/engine.md: npm run migrate # apply pending migrations (safe to run concurrently) npm run worker # run jobs until SIGTERM/SIGINT (graceful) npm run work':
    'a synopsis of the CLI (`<…>` stands for ids and values); test/scripts/cli.test.ts and worker-signals.test.ts run each command',
  'docs/engine.md: npm test -- test/engine/lease.test.ts # one file npm test -- --project engine # one project: engine, worker, clock or stack npm test -- --cha':
    'each would run a part of this very suite; test/docs/inner-loop.test.ts lists the files each selects (`vitest list`, same arguments and environment)',
  'docs/operations.md: npm run ops -- stuck npm run ops -- release-lease 3f6c… # hand a stuck job back to the queue npm run ops -- requeue 3f6c… # run a poison job':
    'ids of jobs that exist only in the example; test/scripts/ops.test.ts runs each ops command',
  'docs/operations.md: npm run ops -- depth | lease | running | stuck | inspect npm run ops -- requeue <id> | fail <id> --reason "…" | cancel <id> | release-lease ':
    'a synopsis (`|` separates alternatives); test/scripts/ops.test.ts runs each ops command',
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
    // the stack file npm start writes (the docs read the sandbox's URL from it)
    copyFileSync(join(stack.dataDir, 'dev-stack.json'), join(cwd, '.data', 'dev-stack.json'));
  }, 150_000);
  afterAll(() => {
    if (cwd) rmSync(cwd, { recursive: true, force: true });
  });

  /**
   * The block as a script on the stack's URL, run as a reader runs the docs: in one shell session.
   * The variables earlier blocks set (T, W, a job's id J, …) are kept in a file of the run's folder
   * and read back first, so a block that sets one runs once, as a reader's would (replaying an
   * assignment would push a second build or enqueue a second job).
   */
  function script(block: DocBlock): string {
    const names = [...new Set(blocks.flatMap((b) => [...b.text.matchAll(/(?:^|;\s*)([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]!)))];
    return [
      '[ -f .doc-vars ] && . ./.doc-vars',
      block.text.replaceAll('http://127.0.0.1:8787', stack.baseUrl.replace(/\/$/, '')),
      `declare -p ${names.join(' ')} > .doc-vars 2>/dev/null || true`,
    ].join('\n');
  }

  for (const key of toRun) {
    it(key, async () => {
      const block = blocks.find((b) => b.key === key);
      expect(block, `no block ${key}`).toBeDefined();
      let stdout = '';
      // a job the answer reports queued is done a moment later, a build within about a minute: what
      // the doc shows may take a few tries (a retry runs the block's commands, never an earlier block's)
      for (const until = Date.now() + 80_000; Date.now() < until; ) {
        // a try whose last command fails (a grep that found nothing yet) is a try that did not match
        ({ stdout } = await run('bash', ['-eu', '-c', script(block!)], { cwd, encoding: 'utf8' }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' })));
        if (!block!.output || matchesShown(block!.output, stdout)) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      // a block the doc shows no output for must at least not be refused
      if (!block!.output) expect(stdout).not.toMatch(/"error":/);
      if (block!.output) expect(stdout.trim(), `${key}\nshown:\n${block!.output}`).toSatisfy((out: string) => matchesShown(block!.output!, out));
    }, 90_000);
  }
});
