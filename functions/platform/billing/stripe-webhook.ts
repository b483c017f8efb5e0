import Stripe from 'stripe';
import { z } from 'zod';
import type { Sql, TransactionSql } from '../../../queue/db.ts';
import { parseRow } from '../rows.ts';

/**
 * POST /webhooks/stripe, minus the HTTP: verify the signature over the raw body, then apply the
 * payment events to the account. The route passes the body exactly as received (any re-encoding
 * breaks the signature) and answers `status` with `body`.
 *
 *   invoice.payment_failed  the account becomes payment_failed (from active), with the event's
 *                           time; the cleanup sweep suspends it after a grace period
 *   invoice.paid            the invoice is paid; once none of the account's invoices has a failed
 *                           payment outstanding, the account is active again and the services the
 *                           sweep suspended for non-payment are resumed
 *
 * A bad signature, a timestamp older than the tolerance (a captured request replayed later) or
 * more than a small clock skew in the future (a delivery signed ahead, replayable until then), or
 * a signed event without the fields it is acted on by (`id`, `type`, `created`, `data.object`, and
 * for an invoice event the invoice's `id`) is a 400 naming the problem and changes nothing. Stripe delivers at least once and in any order: an event id
 * already applied is acknowledged and skipped, and a failure reported for an invoice that is
 * already paid is stale and ignored.
 */

export type StripeWebhookOutcome = 'applied' | 'duplicate' | 'ignored' | 'stale';

export type StripeWebhookResult =
  | { status: 200; body: { received: true; eventId: string; type: string; outcome: StripeWebhookOutcome; accountId?: string } }
  /** `code` is absent for a signature refused, `invalid_event` for a signed event without the fields it is acted on by. */
  | { status: 400; body: { error: string; code?: 'invalid_event'; field?: string } };

export interface StripeWebhookOptions {
  /** Oldest signature timestamp accepted, in seconds (Stripe's default: 300). */
  toleranceSeconds?: number;
  /** Furthest a signature timestamp may be ahead of our clock, in seconds (clock skew; default 300). */
  futureSkewSeconds?: number;
  /** The time the request was received (tests pin it); the clock when absent. */
  now?: Date;
}

const idRow = z.object({ id: z.string() });
const statusRow = z.object({ status: z.string() });
const countRow = z.object({ n: z.number().int() });

const HANDLED = new Set(['invoice.payment_failed', 'invoice.paid']);
const cryptoProvider = Stripe.createSubtleCryptoProvider();

export async function handleStripeWebhook(
  sql: Sql,
  stripe: Stripe,
  rawBody: string,
  signatureHeader: string | null | undefined,
  secret: string,
  options: StripeWebhookOptions = {},
): Promise<StripeWebhookResult> {
  const refuse = (error: string) => ({ status: 400 as const, body: { error } });
  if (!signatureHeader) return refuse('missing Stripe-Signature header');
  const nowMs = (options.now ?? new Date()).getTime();
  let verified: unknown;
  try {
    verified = await stripe.webhooks.constructEventAsync(rawBody, signatureHeader, secret, options.toleranceSeconds ?? 300, cryptoProvider, nowMs);
  } catch (error) {
    // verified, but the body does not parse
    if (error instanceof SyntaxError) return { status: 400, body: { error: 'the event is not JSON', code: 'invalid_event' } };
    // The SDK's message names the problem (no matching signature, timestamp outside the tolerance); its first line is enough.
    const reason = error instanceof Error ? (error.message.split('\n')[0] ?? '').trim() : 'unreadable';
    return refuse(`Stripe signature verification failed: ${reason}`);
  }
  // The SDK checks only the age of the timestamp: one ahead of us passes, and such a delivery could
  // be replayed until its time came plus the tolerance. Read it as the SDK does (the last `t=`).
  const ahead = signatureTimestamp(signatureHeader) - Math.floor(nowMs / 1000);
  const skew = options.futureSkewSeconds ?? 300;
  if (ahead > skew) return refuse(`Stripe signature verification failed: the timestamp is ${ahead} s in the future (more than ${skew} s of clock skew)`);
  const parsed = checkEvent(verified);
  if ('error' in parsed) return { status: 400, body: { error: parsed.error, code: 'invalid_event', ...(parsed.field ? { field: parsed.field } : {}) } };
  const event = parsed.event;
  const received = { received: true as const, eventId: event.id, type: event.type };
  if (!HANDLED.has(event.type)) return { status: 200, body: { ...received, outcome: 'ignored' } };

  const invoice = event.object;
  const invoiceId = invoice.id;
  if (typeof invoiceId !== 'string' || invoiceId === '') {
    return { status: 400, body: { error: `the ${event.type} event has no data.object.id (the invoice)`, code: 'invalid_event', field: 'data.object.id' } };
  }
  const customerId = customerIdOf(invoice.customer);
  const at = new Date(event.created * 1000);
  return sql.begin(async (tx): Promise<StripeWebhookResult> => {
    const [account] = customerId ? await tx`select id from platform.accounts where stripe_customer_id = ${customerId} for update` : [];
    const accountId = account ? parseRow('platform.accounts', idRow, account).id : null;
    const fresh = await tx`
      insert into platform.stripe_events (id, type, account_id, created, received_at)
      values (${event.id}, ${event.type}, ${accountId}, ${at}, ${options.now ?? new Date()})
      on conflict (id) do nothing returning id`;
    if (fresh.length === 0) return { status: 200, body: { ...received, outcome: 'duplicate' } };
    if (!accountId) return { status: 200, body: { ...received, outcome: 'ignored' } };
    const outcome =
      event.type === 'invoice.payment_failed' ? await paymentFailed(tx, accountId, invoiceId, at) : await invoicePaid(tx, accountId, invoiceId, at);
    return { status: 200, body: { ...received, outcome, accountId } };
  });
}

/** The signature's timestamp as the SDK reads it: the last `t=` item of the header. */
function signatureTimestamp(header: string): number {
  let t = -1;
  for (const item of header.split(',')) {
    const [key, value] = item.split('=');
    if (key === 't') t = parseInt(value ?? '', 10);
  }
  return t;
}

/**
 * The signed body as an event with what this handler reads: a signature proves who sent it, not
 * that it has the fields (a shape Stripe never sends, or one from a secret leaked to a tester).
 */
function checkEvent(e: unknown): { event: CheckedEvent } | { error: string; field?: string } {
  if (!isRecord(e)) return { error: 'the event is not a JSON object' };
  if (typeof e.id !== 'string' || e.id === '' || e.id.length > 255) return { error: 'the event has no id (a string)', field: 'id' };
  if (typeof e.type !== 'string' || e.type === '') return { error: 'the event has no type (a string)', field: 'type' };
  if (typeof e.created !== 'number' || !Number.isSafeInteger(e.created) || e.created <= 0) {
    return { error: 'the event has no created (seconds since the epoch)', field: 'created' };
  }
  const data = e.data;
  if (!isRecord(data) || !isRecord(data.object)) {
    return { error: 'the event has no data.object', field: typeof data === 'object' && data !== null ? 'data.object' : 'data' };
  }
  return { event: { id: e.id, type: e.type, created: e.created, object: data.object } };
}

/** What this handler reads of a signed event (the object is the invoice for the events it handles). */
interface CheckedEvent {
  id: string;
  type: string;
  created: number;
  object: Record<string, unknown>;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An invoice's customer: its id, or the expanded customer object's. */
function customerIdOf(customer: unknown): string | null {
  if (typeof customer === 'string') return customer;
  return isRecord(customer) && typeof customer.id === 'string' ? customer.id : null;
}

async function paymentFailed(tx: TransactionSql, accountId: string, stripeInvoiceId: string, at: Date): Promise<StripeWebhookOutcome> {
  const [known] = await tx`select status from platform.invoices where stripe_invoice_id = ${stripeInvoiceId}`;
  if (known && ['paid', 'void'].includes(parseRow('platform.invoices', statusRow, known).status)) return 'stale';
  await tx`update platform.invoices set payment_failed_at = coalesce(payment_failed_at, ${at}) where stripe_invoice_id = ${stripeInvoiceId}`;
  // Only an active account changes: a suspended or cancelled one stays so, and a second failure keeps the first one's time.
  await tx`update platform.accounts set status = 'payment_failed', payment_failed_at = ${at} where id = ${accountId} and status = 'active'`;
  return 'applied';
}

async function invoicePaid(tx: TransactionSql, accountId: string, stripeInvoiceId: string, at: Date): Promise<StripeWebhookOutcome> {
  await tx`
    update platform.invoices set status = 'paid', paid_at = coalesce(paid_at, ${at}), payment_failed_at = null
     where stripe_invoice_id = ${stripeInvoiceId}`;
  const [counted] = await tx`
    select count(*)::int as n from platform.invoices
     where account_id = ${accountId} and payment_failed_at is not null and status not in ('paid', 'void')`;
  if (parseRow('platform.invoices', countRow, counted).n > 0) return 'applied';
  const cleared = await tx`
    update platform.accounts set status = 'active', payment_failed_at = null, suspended_at = null
     where id = ${accountId}
       -- a suspension for anything other than non-payment (no payment_failed_at) is not ours to lift
       and (status = 'payment_failed' or (status = 'suspended' and payment_failed_at is not null))
     returning id`;
  if (cleared.length > 0) {
    await tx`
      update platform.services set desired_state = desired_state - 'suspended' - 'suspendedReason' - 'suspendedAt', updated_at = ${at}
       where account_id = ${accountId} and desired_state->>'suspendedReason' = 'payment_failed'`;
  }
  return 'applied';
}
