import { createHmac } from 'node:crypto';
import type { SandboxProvider, SandboxRequest, SandboxResponse } from './server.ts';

/**
 * Sandbox Stripe: the v1 endpoints the `stripe` SDK calls for month-end billing, with Stripe's
 * form-encoded requests (`metadata[k]=v`, `period[start]=…`), object shapes, error format
 * ({error: {type, code?, message, param?}}) and idempotency semantics:
 *   - a POST with an Idempotency-Key is executed once; the same key with the same endpoint and
 *     parameters replays the first status and body (with `Idempotent-Replayed: true`);
 *   - the same key with another endpoint or other parameters is 400 `idempotency_error`;
 *   - as at Stripe, a request that fails parameter validation saves nothing under its key.
 * Keys are scoped per API key, as Stripe scopes them per account.
 *
 *   POST /v1/customers                  GET /v1/customers/:id
 *   POST /v1/invoices                   GET /v1/invoices/:id      GET /v1/invoices?customer=
 *   POST /v1/invoices/:id/finalize      GET /v1/invoices/:id/lines
 *   POST /v1/invoiceitems               GET /v1/invoiceitems?invoice=&customer=
 *
 * Control (under /_sandbox/stripe/):
 *   GET  /state                  customers, and invoices with their items
 *   POST /customers              {id?, name?, email?} (or an array): customers without going through the API
 *   POST /faults                 {method?, path, status, count?, afterEffect?} (or an array): the next
 *                                `count` matching calls answer `status`; `afterEffect` executes the
 *                                call first (Stripe acted, the answer was lost)
 *   POST /faults/clear
 *   POST /idempotency/expire     forget every saved idempotency key (Stripe prunes them after 24 h)
 *   POST /webhook                {url, secret}: deliver events, signed, to the Worker
 *   POST /invoices/:id/pay       {outcome: 'succeeded' | 'failed'}: a payment attempt; answers (and
 *                                delivers, when a webhook is set) invoice.paid / invoice.payment_failed
 */

type Params = Record<string, unknown>;

interface Customer {
  id: string;
  name: string | null;
  email: string | null;
  metadata: Record<string, string>;
  created: number;
}

interface InvoiceItem {
  id: string;
  seq: number;
  amount: number;
  currency: string;
  customer: string;
  description: string | null;
  invoice: string | null;
  metadata: Record<string, string>;
  period: { start: number; end: number };
  date: number;
}

interface Invoice {
  id: string;
  seq: number;
  customer: string;
  status: 'draft' | 'open' | 'paid' | 'uncollectible' | 'void';
  currency: string;
  description: string | null;
  metadata: Record<string, string>;
  collection_method: string;
  auto_advance: boolean;
  created: number;
  number: string | null;
  attempt_count: number;
  finalized_at: number | null;
  paid_at: number | null;
}

interface SavedResponse {
  endpoint: string;
  params: string;
  response: SandboxResponse;
}

interface Fault {
  method?: string;
  path: string;
  status: number;
  count: number;
  afterEffect?: boolean;
}

/** A Stripe-Signature header value for a payload: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.payload">`. */
export function signStripePayload(payload: string, secret: string, timestampSeconds = Math.floor(Date.now() / 1000)): string {
  const signature = createHmac('sha256', secret).update(`${timestampSeconds}.${payload}`, 'utf8').digest('hex');
  return `t=${timestampSeconds},v1=${signature}`;
}

let eventCounter = 0;

/** The JSON of a Stripe event about an object (what Stripe POSTs to a webhook endpoint). */
export function stripeEventPayload(type: string, object: Record<string, unknown>, options: { id?: string; created?: number } = {}): string {
  return JSON.stringify({
    id: options.id ?? `evt_sb${Date.now().toString(36)}${(++eventCounter).toString(36).padStart(4, '0')}`,
    object: 'event',
    api_version: '2026-10-28.endive',
    created: options.created ?? Math.floor(Date.now() / 1000),
    data: { object },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
  });
}

/** Stripe's form encoding, decoded: `a[b]=1&c[0]=x` → {a: {b: '1'}, c: ['x']}. */
export function decodeStripeForm(body: string): Params {
  const root: Params = {};
  for (const [rawKey, value] of new URLSearchParams(body)) {
    const path = rawKey.split(/\[|\]\[|\]/).filter((p, i) => i === 0 || p !== '');
    let node: Record<string, unknown> = root;
    path.forEach((part, i) => {
      if (i === path.length - 1) {
        node[part] = value;
        return;
      }
      const child = node[part];
      node = (node[part] = child && typeof child === 'object' ? child : {}) as Record<string, unknown>;
    });
  }
  return arraysFromIndexes(root) as Params;
}

function arraysFromIndexes(value: unknown): unknown {
  if (!value || typeof value !== 'object') return value;
  const entries = Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, arraysFromIndexes(v)] as const);
  if (entries.length > 0 && entries.every(([k]) => /^\d+$/.test(k))) return entries.sort(([a], [b]) => Number(a) - Number(b)).map(([, v]) => v);
  return Object.fromEntries(entries);
}

/** Parameters in a canonical form, so equal requests compare equal whatever their field order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Params)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function json(status: number, body: unknown): SandboxResponse {
  return { status, body, headers: { 'request-id': `req_sb${Math.random().toString(36).slice(2, 14)}` } };
}

function stripeError(status: number, type: string, message: string, extra: { code?: string; param?: string } = {}): SandboxResponse {
  return json(status, { error: { type, message, ...extra } });
}

/** A parameter validation failure: as at Stripe, nothing is saved under the idempotency key. */
class InvalidParams extends Error {
  constructor(readonly param: string, message: string) {
    super(message);
  }
}

function requireString(params: Params, name: string): string {
  const v = params[name];
  if (typeof v !== 'string' || v === '') throw new InvalidParams(name, `Missing required param: ${name}.`);
  return v;
}

function optionalString(params: Params, name: string): string | null {
  const v = params[name];
  if (v === undefined) return null;
  if (typeof v !== 'string') throw new InvalidParams(name, `Invalid string: ${name}`);
  return v;
}

function integer(params: Params, name: string, required = false): number | null {
  const v = params[name];
  if (v === undefined) {
    if (required) throw new InvalidParams(name, `Missing required param: ${name}.`);
    return null;
  }
  if (typeof v !== 'string' || !/^-?\d+$/.test(v)) throw new InvalidParams(name, `Invalid integer: ${String(v)}`);
  return Number(v);
}

function boolean(params: Params, name: string, fallback: boolean): boolean {
  const v = params[name];
  if (v === undefined) return fallback;
  if (v !== 'true' && v !== 'false') throw new InvalidParams(name, `Invalid boolean: ${String(v)}`);
  return v === 'true';
}

function metadata(params: Params): Record<string, string> {
  const v = params.metadata;
  if (v === undefined || v === '') return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new InvalidParams('metadata', 'Invalid object');
  return Object.fromEntries(Object.entries(v as Params).map(([k, x]) => [k, String(x)]));
}

const now = () => Math.floor(Date.now() / 1000);
const MAX_ITEMS_PER_INVOICE = 250;

export function stripeSandbox(): SandboxProvider {
  const customers = new Map<string, Customer>();
  const invoices = new Map<string, Invoice>();
  const items = new Map<string, InvoiceItem>();
  // Each invoice's items, in creation order (a month-end run makes tens of thousands of items).
  const itemsByInvoice = new Map<string, InvoiceItem[]>();
  const attach = (item: InvoiceItem, invoiceId: string) => {
    item.invoice = invoiceId;
    itemsByInvoice.set(invoiceId, [...(itemsByInvoice.get(invoiceId) ?? []), item]);
  };
  const saved = new Map<string, SavedResponse>();
  let faults: Fault[] = [];
  let webhook: { url: string; secret: string } | null = null;
  let seq = 0;
  const newId = (prefix: string) => `${prefix}_sb${String(++seq).padStart(8, '0')}`;

  const itemBody = (i: InvoiceItem) => ({
    id: i.id,
    object: 'invoiceitem',
    amount: i.amount,
    currency: i.currency,
    customer: i.customer,
    customer_account: null,
    date: i.date,
    description: i.description,
    discountable: i.amount >= 0,
    discounts: [],
    invoice: i.invoice,
    livemode: false,
    metadata: i.metadata,
    parent: null,
    period: i.period,
    pricing: null,
    proration: false,
    quantity: 1,
    quantity_decimal: '1',
    tax_rates: [],
    test_clock: null,
  });

  const lineBody = (i: InvoiceItem) => ({
    id: `il_${i.id.slice(3)}`,
    object: 'line_item',
    amount: i.amount,
    currency: i.currency,
    description: i.description,
    discount_amounts: [],
    discountable: i.amount >= 0,
    discounts: [],
    invoice: i.invoice,
    livemode: false,
    metadata: i.metadata,
    parent: {
      type: 'invoice_item_details',
      invoice_item_details: { invoice_item: i.id, proration: false, proration_details: null, subscription: null },
      subscription_item_details: null,
    },
    period: i.period,
    pretax_credit_amounts: [],
    pricing: null,
    quantity: 1,
    subtotal: i.amount,
    taxes: [],
  });

  const itemsOf = (invoiceId: string) => itemsByInvoice.get(invoiceId) ?? [];

  const invoiceBody = (inv: Invoice) => {
    const lines = itemsOf(inv.id);
    const total = lines.reduce((sum, i) => sum + i.amount, 0);
    const due = Math.max(0, total);
    const paid = inv.status === 'paid' ? due : 0;
    return {
      id: inv.id,
      object: 'invoice',
      amount_due: due,
      amount_paid: paid,
      amount_remaining: due - paid,
      attempt_count: inv.attempt_count,
      attempted: inv.attempt_count > 0,
      auto_advance: inv.auto_advance,
      collection_method: inv.collection_method,
      created: inv.created,
      currency: inv.currency,
      customer: inv.customer,
      description: inv.description,
      lines: { object: 'list', data: lines.slice(0, 10).map(lineBody), has_more: lines.length > 10, total_count: lines.length, url: `/v1/invoices/${inv.id}/lines` },
      livemode: false,
      metadata: inv.metadata,
      number: inv.number,
      period_end: inv.created,
      period_start: inv.created,
      status: inv.status,
      status_transitions: { finalized_at: inv.finalized_at, marked_uncollectible_at: null, paid_at: inv.paid_at, voided_at: null },
      subtotal: total,
      total,
    };
  };

  const customerBody = (c: Customer) => ({ id: c.id, object: 'customer', created: c.created, email: c.email, livemode: false, metadata: c.metadata, name: c.name });

  /** Stripe's list envelope with `limit` and `starting_after`, newest first. */
  function list<T extends { id: string; seq: number }>(req: SandboxRequest, all: T[], body: (t: T) => unknown, url: string): SandboxResponse {
    const limit = Math.min(Math.max(Number(req.query.get('limit') ?? 10) || 10, 1), 100);
    const sorted = [...all].sort((a, b) => b.seq - a.seq);
    const after = req.query.get('starting_after');
    const from = after ? sorted.findIndex((x) => x.id === after) + 1 : 0;
    const page = sorted.slice(from, from + limit);
    return json(200, { object: 'list', data: page.map(body), has_more: from + limit < sorted.length, url });
  }

  function notFound(kind: string, id: string, param = 'id'): SandboxResponse {
    return stripeError(404, 'invalid_request_error', `No such ${kind}: '${id}'`, { code: 'resource_missing', param });
  }

  function createCustomer(params: Params): Customer {
    const c: Customer = { id: newId('cus'), name: optionalString(params, 'name'), email: optionalString(params, 'email'), metadata: metadata(params), created: now() };
    customers.set(c.id, c);
    return c;
  }

  /** A state-changing request, executed once. */
  function execute(method: string, parts: string[], params: Params): SandboxResponse | undefined {
    const [resource, id, action] = parts;
    if (resource === 'customers' && !id) return json(200, customerBody(createCustomer(params)));
    if (resource === 'invoices' && !id) {
      const customer = requireString(params, 'customer');
      if (!customers.has(customer)) return notFound('customer', customer, 'customer');
      const behavior = optionalString(params, 'pending_invoice_items_behavior') ?? 'exclude';
      if (behavior !== 'exclude' && behavior !== 'include') throw new InvalidParams('pending_invoice_items_behavior', `Invalid pending_invoice_items_behavior: must be one of exclude or include`);
      const inv: Invoice = {
        id: newId('in'),
        seq,
        customer,
        status: 'draft',
        currency: optionalString(params, 'currency') ?? 'usd',
        description: optionalString(params, 'description'),
        metadata: metadata(params),
        collection_method: optionalString(params, 'collection_method') ?? 'charge_automatically',
        auto_advance: boolean(params, 'auto_advance', false),
        created: now(),
        number: null,
        attempt_count: 0,
        finalized_at: null,
        paid_at: null,
      };
      invoices.set(inv.id, inv);
      if (behavior === 'include') for (const i of items.values()) if (i.customer === customer && i.invoice === null) attach(i, inv.id);
      return json(200, invoiceBody(inv));
    }
    if (resource === 'invoices' && id && action === 'finalize') {
      const inv = invoices.get(id);
      if (!inv) return notFound('invoice', id);
      if (inv.status !== 'draft') {
        return stripeError(400, 'invalid_request_error', "This invoice is already finalized, you can't re-finalize a non-draft invoice.", { code: 'invoice_not_editable' });
      }
      inv.auto_advance = boolean(params, 'auto_advance', inv.auto_advance);
      inv.finalized_at = now();
      inv.number = `SB-${String(inv.seq).padStart(6, '0')}`;
      // As at Stripe: an invoice with nothing due is paid on finalization.
      const total = itemsOf(inv.id).reduce((sum, i) => sum + i.amount, 0);
      inv.status = total > 0 ? 'open' : 'paid';
      if (inv.status === 'paid') inv.paid_at = inv.finalized_at;
      return json(200, invoiceBody(inv));
    }
    if (resource === 'invoiceitems' && !id) {
      const customer = requireString(params, 'customer');
      const amount = integer(params, 'amount', true)!;
      const currency = requireString(params, 'currency');
      if (!customers.has(customer)) return notFound('customer', customer, 'customer');
      const invoiceId = optionalString(params, 'invoice');
      const inv = invoiceId ? invoices.get(invoiceId) : undefined;
      if (invoiceId && !inv) return notFound('invoice', invoiceId, 'invoice');
      if (inv && inv.status !== 'draft') {
        return stripeError(400, 'invalid_request_error', `You can only add invoice items to draft invoices; invoice ${inv.id} is ${inv.status}.`, { param: 'invoice' });
      }
      if (inv && inv.customer !== customer) return stripeError(400, 'invalid_request_error', `Invoice ${inv.id} belongs to another customer.`, { param: 'invoice' });
      if (inv && inv.currency !== currency) return stripeError(400, 'invalid_request_error', `The currency ${currency} does not match the invoice's ${inv.currency}.`, { param: 'currency' });
      if (inv && itemsOf(inv.id).length >= MAX_ITEMS_PER_INVOICE) return stripeError(400, 'invalid_request_error', `An invoice can have at most ${MAX_ITEMS_PER_INVOICE} items.`, { param: 'invoice' });
      const period = params.period as Params | undefined;
      const item: InvoiceItem = {
        id: newId('ii'),
        seq,
        amount,
        currency,
        customer,
        description: optionalString(params, 'description'),
        invoice: null,
        metadata: metadata(params),
        period: period ? { start: integer(period, 'start', true)!, end: integer(period, 'end', true)! } : { start: now(), end: now() },
        date: now(),
      };
      items.set(item.id, item);
      if (inv) attach(item, inv.id);
      return json(200, itemBody(item));
    }
    return undefined;
  }

  function read(req: SandboxRequest, parts: string[]): SandboxResponse | undefined {
    const [resource, id, sub] = parts;
    if (resource === 'customers' && id && !sub) {
      const c = customers.get(id);
      return c ? json(200, customerBody(c)) : notFound('customer', id);
    }
    if (resource === 'invoices' && !id) {
      const customer = req.query.get('customer');
      return list(req, [...invoices.values()].filter((i) => !customer || i.customer === customer), invoiceBody, '/v1/invoices');
    }
    if (resource === 'invoices' && id) {
      const inv = invoices.get(id);
      if (!inv) return notFound('invoice', id);
      if (!sub) return json(200, invoiceBody(inv));
      if (sub === 'lines') return list(req, itemsOf(id), lineBody, `/v1/invoices/${id}/lines`);
    }
    if (resource === 'invoiceitems' && !id) {
      const invoice = req.query.get('invoice');
      const customer = req.query.get('customer');
      const candidates = invoice ? itemsOf(invoice) : [...items.values()];
      return list(req, candidates.filter((i) => !customer || i.customer === customer), itemBody, '/v1/invoiceitems');
    }
    return undefined;
  }

  function takeFault(req: SandboxRequest): Fault | undefined {
    const fault = faults.find(
      (f) => f.count > 0 && (!f.method || f.method.toUpperCase() === req.method) && (f.path.endsWith('*') ? req.path.startsWith(f.path.slice(0, -1)) : req.path === f.path),
    );
    if (fault) fault.count--;
    return fault;
  }

  async function deliver(payload: string): Promise<{ status: number } | null> {
    if (!webhook) return null;
    const res = await fetch(webhook.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signStripePayload(payload, webhook.secret) },
      body: payload,
    });
    await res.arrayBuffer();
    return { status: res.status };
  }

  return {
    name: 'stripe',
    handle(req) {
      if (!req.path.startsWith('/v1/')) return undefined;
      const parts = req.path.slice('/v1/'.length).split('/').filter(Boolean);
      if (!['customers', 'invoices', 'invoiceitems'].includes(parts[0] ?? '')) return undefined;
      const auth = /^Bearer ((?:sk|rk)_\S+)$/.exec(req.headers.authorization ?? '');
      if (!auth) return stripeError(401, 'invalid_request_error', 'Invalid API Key provided.');
      const fault = takeFault(req);
      if (fault && !fault.afterEffect) return stripeError(fault.status, fault.status >= 500 ? 'api_error' : 'invalid_request_error', `sandbox fault ${fault.status}`);
      let answer: SandboxResponse | undefined;
      if (req.method === 'GET') {
        answer = read(req, parts);
      } else if (req.method === 'POST') {
        const params = decodeStripeForm(req.body);
        const key = req.headers['idempotency-key'];
        const endpoint = `${req.method} ${req.path}`;
        const scope = key ? `${auth[1]} ${key}` : null;
        const previous = scope ? saved.get(scope) : undefined;
        if (previous) {
          if (previous.endpoint !== endpoint) {
            answer = stripeError(400, 'idempotency_error', `Keys for idempotent requests can only be used for the same endpoint they were first used for ('${previous.endpoint}' vs '${endpoint}'). Try using a key other than '${key}' if you meant to execute a different request.`);
          } else if (previous.params !== canonical(params)) {
            answer = stripeError(400, 'idempotency_error', `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`);
          } else {
            answer = { ...previous.response, headers: { ...previous.response.headers, 'idempotent-replayed': 'true' } };
          }
        } else {
          try {
            answer = execute(req.method, parts, params);
            if (answer && scope) saved.set(scope, { endpoint, params: canonical(params), response: answer });
          } catch (error) {
            if (!(error instanceof InvalidParams)) throw error;
            answer = stripeError(400, 'invalid_request_error', error.message, { param: error.param });
          }
        }
      }
      if (fault) return stripeError(fault.status, fault.status >= 500 ? 'api_error' : 'invalid_request_error', `sandbox fault ${fault.status}`);
      return answer ?? stripeError(404, 'invalid_request_error', `Unrecognized request URL (${req.method}: ${req.path}).`);
    },
    async control(path, req) {
      const body = req.body ? (JSON.parse(req.body) as Params) : {};
      if (path === '/state' && req.method === 'GET') {
        return json(200, {
          customers: [...customers.values()].map(customerBody),
          invoices: [...invoices.values()].map((inv) => ({ ...invoiceBody(inv), items: itemsOf(inv.id).map(itemBody) })),
          pendingItems: [...items.values()].filter((i) => i.invoice === null).map(itemBody),
        });
      }
      if (path === '/customers' && req.method === 'POST') {
        const created = (Array.isArray(body) ? body : [body]).map((spec: Params) => {
          const c = createCustomer({ name: spec.name, email: spec.email });
          if (typeof spec.id === 'string') {
            customers.delete(c.id);
            c.id = spec.id;
            customers.set(c.id, c);
          }
          return customerBody(c);
        });
        return json(200, Array.isArray(body) ? { customers: created } : created[0]);
      }
      if (path === '/faults' && req.method === 'POST') {
        for (const f of (Array.isArray(body) ? body : [body]) as Partial<Fault>[]) {
          if (typeof f.path !== 'string' || typeof f.status !== 'number') return json(400, { error: 'a fault needs path and status' });
          faults.push({ method: f.method, path: f.path, status: f.status, count: f.count ?? 1, afterEffect: f.afterEffect === true });
        }
        return json(200, { faults });
      }
      if (path === '/faults/clear' && req.method === 'POST') {
        faults = [];
        return json(200, { ok: true });
      }
      if (path === '/idempotency/expire' && req.method === 'POST') {
        const expired = saved.size;
        saved.clear();
        return json(200, { expired });
      }
      if (path === '/webhook' && req.method === 'POST') {
        if (typeof body.url !== 'string' || typeof body.secret !== 'string') return json(400, { error: 'url and secret are required' });
        webhook = { url: body.url, secret: body.secret };
        return json(200, { ok: true });
      }
      const pay = /^\/invoices\/([^/]+)\/pay$/.exec(path);
      if (pay && req.method === 'POST') {
        const inv = invoices.get(pay[1]!);
        if (!inv) return json(404, { error: `no invoice ${pay[1]}` });
        if (inv.status !== 'open') return json(409, { error: `invoice ${inv.id} is ${inv.status}, not open` });
        inv.attempt_count++;
        const succeeded = body.outcome !== 'failed';
        if (succeeded) {
          inv.status = 'paid';
          inv.paid_at = now();
        }
        const payload = stripeEventPayload(succeeded ? 'invoice.paid' : 'invoice.payment_failed', invoiceBody(inv));
        const delivery = await deliver(payload);
        return json(200, { event: JSON.parse(payload), delivery });
      }
      return json(404, { error: `no sandbox control ${req.method} /_sandbox/stripe${path}` });
    },
    reset() {
      customers.clear();
      invoices.clear();
      items.clear();
      itemsByInvoice.clear();
      saved.clear();
      faults = [];
      webhook = null;
      seq = 0;
    },
  };
}
