import { describe, expect, it } from 'vitest';
import { JOB_COLUMNS, parseClaimedJob, parseJobEventRow, parseJobRow, RowShapeError } from '../../queue/driver/rows.ts';
import { PARKED_MS } from '../../queue/job.ts';

const row = {
  id: '0190a5e0-0000-7000-8000-000000000001', type: 'uppercase', payload: { text: 'a' }, status: 'queued', priority: 50,
  run_at: new Date('2026-12-01T00:00:00Z'), attempts: 0, max_attempts: 3, locked_until: null, locked_by: null,
  lease_token: null, dedupe_key: null, submit_key: null, last_error: null, result: null, step: 'start', checkpoint: {},
  pool: null, weight: 'light', running_pool: null, concurrency_key: null, concurrency_limit: null, cancel_requested_at: null,
  cancel_reason: null, superseded_by: null, crashes: 0, created_at: new Date('2026-12-01T00:00:00Z'), started_at: null,
  claimed_at: null, finished_at: null, deadline_at: new Date('2026-12-01T04:00:00Z'), deadline_severity: 'critical',
};

describe('driver row parsers', () => {
  it('parse a jobs row, its JSON form and its positional claim form to the same Job', () => {
    const job = parseJobRow(row);
    expect(job).toMatchObject({ id: row.id, status: 'queued', runAt: row.run_at, maxAttempts: 3, checkpoint: {} });
    expect(parseJobRow(JSON.parse(JSON.stringify(row)))).toEqual(job);
    expect(parseClaimedJob(JOB_COLUMNS.map((c) => JSON.parse(JSON.stringify(row))[c]))).toEqual(job);
  });

  it("read a parked job's run_at ('infinity', or postgres.js's invalid Date) as the latest time", () => {
    expect(parseJobRow({ ...row, run_at: 'infinity' }).runAt.getTime()).toBe(PARKED_MS);
    expect(parseJobRow({ ...row, run_at: new Date(Number.NaN) }).runAt.getTime()).toBe(PARKED_MS);
  });

  it('fail loudly on a row that is not the schema’s, naming the column', () => {
    expect(() => parseJobRow({ ...row, status: 'paused' })).toThrow(RowShapeError);
    expect(() => parseJobRow({ ...row, attempts: null })).toThrow(/column attempts/);
    expect(() => parseJobRow({ ...row, deadline_severity: 'p1' })).toThrow(/column deadline_severity/);
    expect(() => parseClaimedJob([row.id])).toThrow(/expected 32/);
    expect(() => parseJobEventRow({ id: '12', job_id: row.id, at: row.run_at, kind: 'done', detail: [] })).toThrow(/column detail/);
    expect(parseJobEventRow({ id: '12', job_id: row.id, at: row.run_at, kind: 'done', detail: {} }).id).toBe(12);
  });
});
