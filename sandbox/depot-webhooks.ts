import { DEPOT_SIGNATURE_HEADER, signDepotWebhook } from '../functions/platform/build/depot-webhook-signature.ts';

/**
 * The sandbox Depot's build-finished webhooks: signed as functions/platform/build/depot-webhook.ts
 * verifies them, POSTed to the configured URL, and every delivery recorded as sent (fakes record
 * what they did). Without a URL a delivery is recorded and not sent, so a test whose Worker the
 * sandbox cannot reach (one inside workerd) relays it itself.
 */

export type FinishedStatus = 'STATUS_SUCCESS' | 'STATUS_FAILED' | 'STATUS_CANCELED';

export interface DepotWebhookDelivery {
  id: string;
  buildId: string;
  status: FinishedStatus;
  /** null: no webhook URL was set, so it was recorded and not sent. */
  url: string | null;
  headers: Record<string, string>;
  body: string;
  sentAt: string;
  /** The receiver's answer (its HTTP status), or why sending failed; null when not sent. */
  answer: { status: number } | { error: string } | null;
}

export interface WebhookTarget {
  url: string | null;
  secret: string;
}

/** The secret the sandbox signs with until told another (`npm start` gives the Worker the same). */
export const SANDBOX_DEPOT_WEBHOOK_SECRET = 'depot_whsec_sandbox_dev';

export function createDepotWebhooks() {
  let target: WebhookTarget = { url: null, secret: SANDBOX_DEPOT_WEBHOOK_SECRET };
  let deliveries: DepotWebhookDelivery[] = [];
  let counter = 0;

  async function send(delivery: DepotWebhookDelivery, timestampSeconds?: number): Promise<DepotWebhookDelivery> {
    const signature = await signDepotWebhook(delivery.body, target.secret, timestampSeconds);
    const sent: DepotWebhookDelivery = {
      ...delivery,
      url: target.url,
      headers: { 'content-type': 'application/json', [DEPOT_SIGNATURE_HEADER]: signature },
      sentAt: new Date().toISOString(),
      answer: null,
    };
    deliveries.push(sent);
    if (!sent.url) return sent;
    try {
      const res = await fetch(sent.url, { method: 'POST', headers: sent.headers, body: sent.body });
      await res.arrayBuffer();
      sent.answer = { status: res.status };
    } catch (error) {
      sent.answer = { error: (error as Error).message };
    }
    return sent;
  }

  return {
    configure(next: Partial<WebhookTarget>): WebhookTarget {
      target = { url: next.url === undefined ? target.url : next.url, secret: next.secret ?? target.secret };
      return target;
    },
    /** Deliver "build finished" for a build that just ended. */
    finished(build: { buildId: string; projectId: string }, status: FinishedStatus, timestampSeconds?: number): Promise<DepotWebhookDelivery> {
      const id = `dwh_${(++counter).toString(36).padStart(6, '0')}`;
      const created = timestampSeconds ?? Math.floor(Date.now() / 1000);
      const body = JSON.stringify({ id, type: 'build.finished', created, data: { projectId: build.projectId, buildId: build.buildId, status } });
      return send({ id, buildId: build.buildId, status, url: null, headers: {}, body, sentAt: '', answer: null }, timestampSeconds);
    },
    /** The same delivery (same id and body) again, signed anew. */
    async redeliver(id: string, timestampSeconds?: number): Promise<DepotWebhookDelivery | null> {
      const original = deliveries.find((d) => d.id === id);
      return original ? send(original, timestampSeconds) : null;
    },
    deliveries: () => deliveries,
    reset() {
      target = { url: null, secret: SANDBOX_DEPOT_WEBHOOK_SECRET };
      deliveries = [];
      counter = 0;
    },
  };
}
