import type { AlertMessage, Alerts } from '../../queue/index.ts';
import { alertTitle } from '../lib/alert-kinds.ts';

export interface WebhookAlertsOptions {
  /** A Slack incoming-webhook URL (or any endpoint taking Slack's `{text}` JSON); a secret. */
  url: string;
  /** Removes known secret values from the text (alert messages quote job errors, which can echo one). */
  scrub?: (text: string) => string;
  /** Link target for a job's alert, e.g. `https://worker.example.com/dashboard/jobs/`. */
  jobLinkBase?: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** Slack's mrkdwn treats &, < and > as control characters. */
const escapeMrkdwn = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The text of one alert as Slack shows it. */
export function alertText(alert: AlertMessage, options: Pick<WebhookAlertsOptions, 'scrub' | 'jobLinkBase'> = {}): string {
  const scrub = options.scrub ?? ((s: string) => s);
  const title = alertTitle(alert.kind);
  // the severity in words and in the icon, so a critical alert (the manual's P1) stands out in the channel
  const icon = alert.severity === 'critical' ? ':rotating_light:' : ':warning:';
  const lines = [
    `${icon} *${escapeMrkdwn(title)}* [${alert.severity}] (${escapeMrkdwn(alert.kind)} ${escapeMrkdwn(alert.key)})`,
    escapeMrkdwn(scrub(alert.message)),
  ];
  if (alert.jobId && options.jobLinkBase) lines.push(`<${options.jobLinkBase}${alert.jobId}|open job ${alert.jobId}>`);
  lines.push(`opened ${alert.openedAt.toISOString()}`);
  return lines.join('\n');
}

/**
 * The Alerts port over an incoming webhook: each alert is one POST of `{"text": …}`. A non-2xx
 * answer or a timeout throws, so the alert stays pending and the next delivery pass sends it
 * again; the error names the status, never the URL (which is the secret).
 */
export class WebhookAlerts implements Alerts {
  private readonly fetch: typeof fetch;

  constructor(private readonly options: WebhookAlertsOptions) {
    if (!/^https?:\/\//.test(options.url)) throw new Error('the alert webhook URL must be an http(s) URL');
    this.fetch = options.fetch ?? ((input, init) => fetch(input, init));
  }

  async send(alert: AlertMessage): Promise<void> {
    let res: Response;
    try {
      res = await this.fetch(this.options.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: alertText(alert, this.options) }),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 5000),
      });
    } catch (error) {
      throw new Error(`alert webhook unreachable: ${(error as Error).name}`);
    }
    const body = (await res.text()).slice(0, 200);
    if (!res.ok) throw new Error(`alert webhook answered ${res.status}: ${body}`);
  }
}
