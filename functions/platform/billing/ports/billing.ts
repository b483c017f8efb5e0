/**
 * The payment provider the month-end run bills through (Stripe in production and, through the
 * same SDK, the sandbox in tests and `npm start`). Plain data in and out; no SDK types.
 *
 * Every create call takes an idempotency key, and callers derive keys deterministically from
 * (account, period, line), so a retry after a crash at any point replays the provider's first
 * answer instead of billing twice (see `billingKeys`).
 */

export type ProviderInvoiceStatus = 'draft' | 'open' | 'paid' | 'uncollectible' | 'void';

export interface ProviderInvoice {
  id: string;
  status: ProviderInvoiceStatus;
  totalCents: number;
}

export interface CreateInvoiceInput {
  customerId: string;
  accountId: string;
  period: string;
  currency: string;
  description: string;
  idempotencyKey: string;
}

export interface CreateInvoiceItemInput {
  customerId: string;
  /** The draft invoice the item goes on (never the customer's pending items). */
  invoiceId: string;
  /** The line's key within the invoice (stored with the item so a resumed run can see it is there). */
  lineKey: string;
  description: string;
  /** Integer cents; negative for a credit. */
  amountCents: number;
  currency: string;
  /** The service period the line covers, [start, end). */
  periodStart: Date;
  periodEnd: Date;
  idempotencyKey: string;
}

export interface Billing {
  /** A draft invoice for the customer, collected automatically once finalized. */
  createInvoice(input: CreateInvoiceInput): Promise<ProviderInvoice>;
  getInvoice(invoiceId: string): Promise<ProviderInvoice>;
  /** The line keys of the items already on a draft invoice. */
  listInvoiceLineKeys(invoiceId: string): Promise<Set<string>>;
  createInvoiceItem(input: CreateInvoiceItemInput): Promise<{ id: string }>;
  /** Finalize a draft: it becomes `open` (or `paid` when nothing is due) and collection starts. */
  finalizeInvoice(invoiceId: string, options: { idempotencyKey: string }): Promise<ProviderInvoice>;
}

/**
 * The provider refused the request and repeating it cannot help (unknown customer, invalid
 * parameters, an idempotency key reused with other parameters). Anything else a Billing call
 * throws is worth retrying.
 */
export class BillingRejectedError extends Error {
  constructor(message: string, readonly code?: string) {
    super(message);
    this.name = 'BillingRejectedError';
  }
}

const MAX_KEY_LENGTH = 255; // Stripe's limit for an Idempotency-Key

/**
 * The idempotency keys of one account's invoice for one period. Readable (they show in the
 * Stripe dashboard's request log) and the same on every run, so a retry or a second run of the
 * month-end job for the same period can never create a second invoice or a second item.
 */
export function billingKeys(accountId: string, period: string) {
  const key = (...parts: string[]) => {
    const k = ['starbase', ...parts].join(':');
    if (k.length > MAX_KEY_LENGTH) throw new BillingRejectedError(`idempotency key longer than ${MAX_KEY_LENGTH} characters: ${k.slice(0, 80)}…`);
    return k;
  };
  return {
    invoice: key('invoice', period, accountId),
    item: (lineKey: string) => key('invoice-item', period, accountId, lineKey),
    finalize: key('finalize', period, accountId),
  };
}
