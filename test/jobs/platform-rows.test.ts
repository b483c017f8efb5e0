import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { invoiceAccountJob } from '../../functions/platform/billing/invoice-account.ts';
import type { Billing } from '../../functions/platform/billing/ports/billing.ts';
import { intColumn, parseRow, parseRows, PlatformRowError } from '../../functions/platform/rows.ts';
import { enqueue, JobRegistry, runSteps } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * Issue 15: the platform jobs parse the platform.* rows they read once, beside the statement. A
 * row of the wrong shape (a migration and a job disagree) fails with an error naming the table
 * and the column, instead of a cast letting a wrong value travel on.
 */

describe('parseRow', () => {
  const row = z.object({ id: z.string(), total_cents: intColumn, at: z.date().nullable() });

  it('gives the typed row, a bigint (a string from postgres.js) as a number', () => {
    const at = new Date('2026-12-01T00:00:00Z');
    expect(parseRow('platform.invoices', row, { id: 'a', total_cents: '2300', at })).toEqual({ id: 'a', total_cents: 2300, at });
    expect(parseRows('platform.invoices', row, [{ id: 'b', total_cents: 5, at: null }])).toEqual([{ id: 'b', total_cents: 5, at: null }]);
  });

  it('names the table and the column of a value of the wrong shape', () => {
    expect(() => parseRow('platform.invoices', row, { id: 7, total_cents: 1, at: null })).toThrow(PlatformRowError);
    expect(() => parseRow('platform.invoices', row, { id: 'a', total_cents: '12.5', at: null })).toThrow(/^platform\.invoices row: column total_cents /);
    expect(() => parseRow('platform.invoices', row, { id: 'a', total_cents: 1 })).toThrow(/^platform\.invoices row: column at /);
  });

  it('names the table of a missing row', () => {
    expect(() => parseRow('platform.plans', row, undefined)).toThrow(/^platform\.plans row: column \* .*no row/);
  });
});

describe('invoice_account on a frozen invoice row of the wrong shape', () => {
  let db: TestDatabase;
  const clock = new Date('2026-12-01T01:00:00Z');

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.sql`insert into platform.plans (id, name, monthly_price_cents, included_credit_cents) values ('starter', 'Starter', 2000, 500)`;
    await db.sql`select platform.create_account('acct_rows', 'starter', 'cus_rows', '2026-01-01'::timestamptz)`;
  });

  it('fails naming platform.invoices and the line field, and calls no provider', async () => {
    // A line without its kind: a shape no code of this job writes.
    await db.sql`
      insert into platform.invoices (account_id, period, plan, stripe_customer_id, lines, total_cents, currency, status, created_at)
      values ('acct_rows', '2026-11', 'starter', 'cus_rows', ${db.sql.json([{ key: 'plan', description: 'Starter', amountCents: 2000 }])}, 2000, 'usd', 'draft', ${clock})`;
    const calls: string[] = [];
    const refuse = (name: string) => async (): Promise<never> => {
      calls.push(name);
      throw new Error(`${name} must not be called`);
    };
    const billing: Billing = {
      createInvoice: refuse('createInvoice'),
      getInvoice: refuse('getInvoice'),
      listInvoiceLineKeys: refuse('listInvoiceLineKeys'),
      createInvoiceItem: refuse('createInvoiceItem'),
      finalizeInvoice: refuse('finalizeInvoice'),
    };
    const { job: { id } } = await enqueue(db.sql, { type: 'invoice_account', payload: { accountId: 'acct_rows', period: '2026-11' } }, { now: clock });
    await runSteps({ sql: db.sql, registry: new JobRegistry([invoiceAccountJob({ billing })]), workerId: 'rows-test', clock: () => clock });
    const [job] = await db.sql`select last_error from worker.jobs where id = ${id}`;
    expect(String(job?.last_error)).toMatch(/platform\.invoices row: column lines\.0\.kind /);
    expect(calls).toEqual([]);
  });
});
