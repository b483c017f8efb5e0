import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, inject } from 'vitest';
import { connect, type Sql } from '../../queue/db.ts';
import { FUNCTION_FILE, MIGRATION_FILE, MIGRATIONS_DIR } from '../../queue/migrate.ts';
import { withDatabase } from '../../scripts/lib/database-url.ts';

/**
 * An earlier release's migrations/ for the migration tests: the migrations before `release`, and
 * each function as that release had it. test/fixtures/functions-before-NNNN holds the text a
 * function had before migration NNNN changed it; a function is taken from the first of those
 * folders, from `release` on, that has it, else from today's migrations/functions. A function
 * added from `release` on is left out (the release had none); one dropped since is in a fixture.
 */
const FIXTURES = new URL('../fixtures/', import.meta.url).pathname;

/** Function files added by the migrations since 0160, by the migration that added them. */
const ADDED: Record<string, string[]> = {
  '0160': ['worker.claimed_event_detail.sql', 'worker.done_step_rows.sql', 'worker.write_row_held_events.sql'],
  '0170': ['worker.check_pool_capacity_window.sql', 'worker.in_time_window.sql', 'worker.pool_largest_capacity.sql', 'worker.pool_limit_at.sql'],
  '0180': ['worker.prepare_deadline.sql'],
  '0190': ['worker.check_signal_name.sql', 'worker.deliver_signal.sql', 'worker.end_timed_out_wait.sql', 'worker.lock_signal_channel.sql',
    'worker.signal.sql', 'worker.wait_for.sql', 'worker.wait_is_open.sql'],
  '0200': ['worker.cancel_children.sql', 'worker.child_job_ended.sql', 'worker.spawn_children.sql'],
  '0210': ['worker.claim_eligible.sql', 'worker.fair_claim_candidates.sql', 'worker.pause_claims.sql', 'worker.rate_limit_room.sql',
    'worker.resume_claims.sql', 'worker.settle_rate_limited.sql'],
  '0220': ['worker.bulk_apply.sql', 'worker.bulk_cancel.sql', 'worker.bulk_requeue.sql', 'worker.dead_letters.sql', 'worker.error_fingerprint.sql',
    'worker.job_filter_matches.sql', 'worker.job_filter_next_ids.sql', 'worker.job_filter_of.sql', 'worker.normalize_error.sql', 'worker.replay_job.sql'],
  '0240': ['worker.claim_held_by_pause.sql', 'worker.payload_key.sql', 'worker.prepare_flow_keys.sql', 'worker.prune_signals.sql',
    'worker.resume_rate_key.sql'],
};

const dirs: string[] = [];
const databases: string[] = [];
const clients: Sql[] = [];
const admin = postgres(inject('adminDatabaseUrl'), { max: 1, onnotice: () => {} });
afterAll(async () => {
  await Promise.all(clients.splice(0).map((c) => c.end({ timeout: 5 })));
  for (const name of databases.splice(0)) await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.end();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

export function previousRelease(release: string): string {
  const dir = mkdtempSync(join(tmpdir(), `sbt-migrations-before-${release}-`));
  dirs.push(dir);
  mkdirSync(join(dir, 'functions'));
  for (const f of readdirSync(MIGRATIONS_DIR).filter((f) => MIGRATION_FILE.test(f) && f < release)) symlinkSync(join(MIGRATIONS_DIR, f), join(dir, f));
  const fixtures = readdirSync(FIXTURES).filter((d) => /^functions-before-\d{4}$/.test(d) && d.slice(-4) >= release).sort();
  const added = Object.entries(ADDED).filter(([m]) => m >= release).flatMap(([, files]) => files);
  // Today's functions, and those a later migration dropped (only a fixture holds their text).
  const files = new Set([...readdirSync(join(MIGRATIONS_DIR, 'functions')), ...fixtures.flatMap((d) => readdirSync(join(FIXTURES, d)))]);
  for (const f of [...files].filter((f) => FUNCTION_FILE.test(f) && !added.includes(f))) {
    const before = fixtures.map((d) => join(FIXTURES, d, f)).find((p) => existsSync(p));
    symlinkSync(before ?? join(MIGRATIONS_DIR, 'functions', f), join(dir, 'functions', f));
  }
  return dir;
}

/** An empty database, dropped after the file's tests. */
export async function emptyDatabase(prefix: string): Promise<Sql> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  databases.push(name);
  await admin.unsafe(`create database ${name}`);
  const sql = connect(withDatabase(inject('adminDatabaseUrl'), name), { max: 2 });
  clients.push(sql);
  return sql;
}
