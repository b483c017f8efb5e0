import { beforeAll, describe, expect, it } from 'vitest';
import { R2AccountLogObjects } from '../../functions/platform/cleanup/adapters/r2-account-logs.ts';
import { enqueue } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { seedAccount, seedService } from '../support/tenancy.ts';

/**
 * The account's build-log objects the purge deletes: found through its services' build jobs
 * (real Postgres), oldest build first; the bucket is a recorder of the keys it is asked to delete.
 */

let db: TestDatabase;
const at = (minute: number) => new Date(Date.UTC(2026, 11, 1, 12, minute));
const jobs: Record<string, string> = {};

class RecordingBucket {
  readonly deleted: (string | string[])[] = [];
  async delete(keys: string | string[]) {
    this.deleted.push(keys);
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
  await db.sql`insert into worker.job_types (type) values ('build'), ('other') on conflict do nothing`;
  for (const account of ['acct-logs-a', 'acct-logs-b', 'acct-logs-empty']) await seedAccount(db.sql, account);
  await seedService(db.sql, 'svc-a1', 'acct-logs-a');
  await seedService(db.sql, 'svc-a2', 'acct-logs-a');
  await seedService(db.sql, 'svc-b1', 'acct-logs-b');
  const builds: [string, string, string, number][] = [
    ['b-a2', 'build', 'svc-a2', 1],
    ['b-a1', 'build', 'svc-a1', 2],
    ['b-b1', 'build', 'svc-b1', 0],
    ['other-a1', 'other', 'svc-a1', 3],
  ];
  for (const [name, type, serviceId, minute] of builds) {
    jobs[name] = (await enqueue(db.sql, { type, payload: { serviceId } }, { now: at(minute) })).job.id;
  }
});

describe('R2AccountLogObjects', () => {
  it("lists the archive keys of the account's build jobs, oldest first, up to the limit", async () => {
    const logs = new R2AccountLogObjects(db.sql, new RecordingBucket());
    expect(await logs.list('acct-logs-a', 10)).toEqual([`builds/${jobs['b-a2']}.log`, `builds/${jobs['b-a1']}.log`]);
    expect(await logs.list('acct-logs-a', 1)).toEqual([`builds/${jobs['b-a2']}.log`]);
    expect(await logs.list('acct-logs-b', 10)).toEqual([`builds/${jobs['b-b1']}.log`]);
    expect(await logs.list('acct-logs-empty', 10)).toEqual([]);
    expect(await logs.list('acct-logs-unknown', 10)).toEqual([]);
  });

  it('deletes the keys it is given, and asks the bucket nothing for none', async () => {
    const bucket = new RecordingBucket();
    const logs = new R2AccountLogObjects(db.sql, bucket);
    await logs.delete([]);
    await logs.delete(['builds/x.log', 'builds/y.log']);
    expect(bucket.deleted).toEqual([['builds/x.log', 'builds/y.log']]);
  });
});
