import Stripe from 'stripe';
import {
  BillingRejectedError,
  type Billing,
  type CreateInvoiceInput,
  type CreateInvoiceItemInput,
  type ProviderInvoice,
  type ProviderInvoiceStatus,
} from '../ports/billing.ts';

/**
 * The Billing port over the official `stripe` SDK with its fetch HTTP client (so the same code
 * runs in Node and in workerd). Only the host changes between production and the sandbox.
 */

export interface StripeClientConfig {
  /** STRIPE_SECRET_KEY. */
  secretKey: string;
  /** Where the API is, e.g. the sandbox's `http://127.0.0.1:8788`; Stripe itself when absent. */
  apiBase?: string;
  /** The same as separate parts (STRIPE_API_HOST / _PORT / _PROTOCOL); each overrides apiBase's. */
  host?: string;
  port?: string | number;
  protocol?: 'http' | 'https';
  /** SDK-level retries of network errors and 409/429/5xx, under the same idempotency key. */
  maxNetworkRetries?: number;
  timeoutMs?: number;
}

type StripeOptions = NonNullable<ConstructorParameters<typeof Stripe>[1]>;

export function createStripeClient(config: StripeClientConfig): Stripe {
  const options: StripeOptions = {
    httpClient: Stripe.createFetchHttpClient(),
    maxNetworkRetries: config.maxNetworkRetries ?? 2,
    timeout: config.timeoutMs ?? 20_000,
    telemetry: false,
  };
  const base = config.apiBase ? new URL(config.apiBase) : null;
  const protocol = config.protocol ?? (base ? (base.protocol === 'http:' ? 'http' : 'https') : undefined);
  const host = config.host ?? base?.hostname;
  if (host) {
    options.host = host;
    options.protocol = protocol ?? 'https';
    options.port = config.port || base?.port || (options.protocol === 'http' ? 80 : 443);
  }
  return new Stripe(config.secretKey, options);
}

/** The client the Worker builds from its env (STRIPE_API_* point it at the sandbox under `npm start`). */
/** The env vars the Stripe client is made from (the Worker's env, or process.env in Node). */
export interface StripeEnv {
  STRIPE_SECRET_KEY?: unknown;
  STRIPE_API_HOST?: unknown;
  STRIPE_API_PORT?: unknown;
  STRIPE_API_PROTOCOL?: unknown;
}

export function stripeClientFromEnv(env: StripeEnv): Stripe | null {
  const text = (name: keyof StripeEnv) => (typeof env[name] === 'string' && env[name] !== '' ? (env[name] as string) : undefined);
  const secretKey = text('STRIPE_SECRET_KEY');
  if (!secretKey) return null;
  const protocol = text('STRIPE_API_PROTOCOL');
  if (protocol !== undefined && protocol !== 'http' && protocol !== 'https') throw new Error(`STRIPE_API_PROTOCOL must be http or https, got ${protocol}`);
  return createStripeClient({ secretKey, host: text('STRIPE_API_HOST'), port: text('STRIPE_API_PORT'), protocol });
}

/** Metadata keys on the objects we create: how an operator (and a resumed run) ties them back. */
export const METADATA = { account: 'starbase_account', period: 'starbase_period', line: 'starbase_line' } as const;

export class StripeBilling implements Billing {
  constructor(private readonly stripe: Stripe) {}

  async createInvoice(input: CreateInvoiceInput): Promise<ProviderInvoice> {
    const invoice = await call(() =>
      this.stripe.invoices.create(
        {
          customer: input.customerId,
          currency: input.currency,
          description: input.description,
          collection_method: 'charge_automatically',
          // We finalize explicitly once every item is on; pending items of the customer stay out.
          auto_advance: false,
          pending_invoice_items_behavior: 'exclude',
          metadata: { [METADATA.account]: input.accountId, [METADATA.period]: input.period },
        },
        { idempotencyKey: input.idempotencyKey },
      ),
    );
    return toProviderInvoice(invoice);
  }

  async getInvoice(invoiceId: string): Promise<ProviderInvoice> {
    return toProviderInvoice(await call(() => this.stripe.invoices.retrieve(invoiceId)));
  }

  async listInvoiceLineKeys(invoiceId: string): Promise<Set<string>> {
    const keys = new Set<string>();
    await call(() =>
      this.stripe.invoiceItems.list({ invoice: invoiceId, limit: 100 }).autoPagingEach((item) => {
        const key = item.metadata?.[METADATA.line];
        if (key) keys.add(key);
      }),
    );
    return keys;
  }

  async createInvoiceItem(input: CreateInvoiceItemInput): Promise<{ id: string }> {
    const item = await call(() =>
      this.stripe.invoiceItems.create(
        {
          customer: input.customerId,
          invoice: input.invoiceId,
          amount: input.amountCents,
          currency: input.currency,
          description: input.description,
          // Stripe's period end is inclusive.
          period: { start: seconds(input.periodStart), end: seconds(input.periodEnd) - 1 },
          metadata: { [METADATA.line]: input.lineKey },
        },
        { idempotencyKey: input.idempotencyKey },
      ),
    );
    return { id: item.id };
  }

  async finalizeInvoice(invoiceId: string, options: { idempotencyKey: string }): Promise<ProviderInvoice> {
    const invoice = await call(() => this.stripe.invoices.finalizeInvoice(invoiceId, { auto_advance: true }, { idempotencyKey: options.idempotencyKey }));
    return toProviderInvoice(invoice);
  }
}

function seconds(at: Date): number {
  return Math.floor(at.getTime() / 1000);
}

function toProviderInvoice(invoice: Stripe.Invoice): ProviderInvoice {
  return { id: invoice.id, status: (invoice.status ?? 'draft') as ProviderInvoiceStatus, totalCents: invoice.total };
}

/**
 * Stripe's refusals (4xx other than 409/429: bad parameters, unknown customer, an idempotency key
 * reused with other parameters, a bad API key) become BillingRejectedError; retrying them cannot
 * help. Rate limits, 5xx and network errors pass through to be retried.
 */
async function call<T>(request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    if (error instanceof Stripe.errors.StripeError) {
      const status = error.statusCode ?? 0;
      if (status >= 400 && status < 500 && status !== 409 && status !== 429) {
        const type = error.rawType ?? error.type;
        throw new BillingRejectedError(`Stripe refused the request (${status} ${type}${error.code ? `/${error.code}` : ''}): ${error.message}`, error.code ?? type);
      }
      throw new Error(`Stripe request failed (${status || 'network'} ${error.rawType ?? error.type}): ${error.message}`);
    }
    throw error;
  }
}
