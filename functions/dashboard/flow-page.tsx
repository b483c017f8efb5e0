import type { FC } from 'hono/jsx';
import { age, time } from './components.tsx';
import { Layout } from './layout.tsx';
import { Csrf, TopBar, type Lease } from './pages.tsx';
import type { Pause, RateLimitState } from './queries.ts';

export interface FlowPageData {
  now: Date;
  csrf: string;
  lease: Lease;
  pauses: Pause[];
  rateLimits: RateLimitState[];
  types: string[];
  /** The form's values when it is shown again with an error. */
  shown?: Record<string, string>;
  notice?: string;
  error?: string;
  scrub: (text: string) => string;
}

/** A window in the units a type declares it in: 1m, 30s, 2h. */
function windowText(ms: number): string {
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) if (ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

const Pauses: FC<{ pauses: Pause[]; csrf: string; now: Date; scrub: (text: string) => string }> = ({ pauses, csrf, now, scrub }) => (
  <table id="pauses">
    <thead><tr><th>kind</th><th>name</th><th>paused by</th><th>since</th><th>why</th><th></th></tr></thead>
    <tbody>
      {pauses.length === 0 ? <tr><td colspan={6} class="muted">Nothing is paused: every type and pool is claimed.</td></tr> : null}
      {pauses.map((p) => (
        <tr data-pause={`${p.kind}:${p.name}`}>
          <td>{p.kind}</td>
          <td class="mono">{p.name}</td>
          <td>{scrub(p.pausedBy)}</td>
          <td title={time(p.pausedAt)}>{age(now.getTime() - p.pausedAt.getTime())} ago</td>
          <td>{scrub(p.reason)}</td>
          <td>
            <form class="inline" method="post" action="/dashboard/flow/resume">
              <Csrf token={csrf} />
              <input type="hidden" name="kind" value={p.kind} />
              <input type="hidden" name="name" value={p.name} />
              <button type="submit" class="primary">Resume</button>
            </form>
          </td>
        </tr>
      ))}
    </tbody>
  </table>
);

const PauseForm: FC<{ csrf: string; types: string[]; shown: Record<string, string> }> = ({ csrf, types, shown }) => (
  <form method="post" action="/dashboard/flow/pause" class="actions" id="pause-form">
    <Csrf token={csrf} />
    <label>kind <select name="kind">
      <option value="type" selected={shown.kind !== 'pool'}>job type</option>
      <option value="pool" selected={shown.kind === 'pool'}>pool</option>
    </select></label>
    <input name="name" list="job-types" value={shown.name ?? ''} placeholder="type or pool name" required maxlength={200} aria-label="name" />
    <datalist id="job-types">{types.map((t) => <option value={t} />)}</datalist>
    <input name="reason" value={shown.reason ?? ''} placeholder="why (required)" required maxlength={1000} size={40} aria-label="reason" />
    <button type="submit" class="danger">Pause</button>
  </form>
);

const RateLimits: FC<{ rows: RateLimitState[]; now: Date; scrub: (text: string) => string }> = ({ rows, now, scrub }) => (
  <table id="rate-limits">
    <thead><tr><th>key</th><th>limit</th><th>started in the window</th><th>queued</th><th>paused (a provider's 429)</th></tr></thead>
    <tbody>
      {rows.length === 0 ? <tr><td colspan={5} class="muted">No job type declares a rate limit.</td></tr> : null}
      {rows.map((r) => (
        <tr data-rate-key={r.key} class={r.pausedUntil ? 'row-failed' : undefined}>
          <td class="mono">{r.key}</td>
          <td>{r.limit} per {windowText(r.perMs)}</td>
          <td data-started="">{r.startedInWindow} of {r.limit}</td>
          <td>{r.queued}</td>
          <td data-paused-until={r.pausedUntil?.toISOString() ?? ''}>
            {r.pausedUntil ? <>until {time(r.pausedUntil)} (in {age(r.pausedUntil.getTime() - now.getTime())}){r.pauseReason ? `: ${scrub(r.pauseReason)}` : ''}</> : <span class="muted">no</span>}
          </td>
        </tr>
      ))}
    </tbody>
  </table>
);

/** Flow control: what is paused (with Resume), a form to pause a type or a pool, and each rate key's window. No reload: it would empty a half-typed form. */
export const FlowPage: FC<FlowPageData> = (d) => (
  <Layout title="Flow control" header={<TopBar csrf={d.csrf} lease={d.lease} now={d.now} />}>
    {d.notice ? <div class="notice" role="status">{d.notice}</div> : null}
    {d.error ? <div class="error" role="alert">{d.error}</div> : null}
    <section class="panel" id="flow">
      <h2>Paused ({d.pauses.length})</h2>
      <p class="muted">Claims skip a paused type or pool: its queued jobs wait as they are and its running jobs finish their step.</p>
      <Pauses pauses={d.pauses} csrf={d.csrf} now={d.now} scrub={d.scrub} />
      <h2>Pause a type or a pool</h2>
      <PauseForm csrf={d.csrf} types={d.types} shown={d.shown ?? {}} />
    </section>
    <section class="panel" id="rates">
      <h2>Rate limits ({d.rateLimits.length})</h2>
      <p class="muted">At most the limit of a key's steps start in any window; a provider's 429 pauses the key until its Retry-After.</p>
      <RateLimits rows={d.rateLimits} now={d.now} scrub={d.scrub} />
    </section>
  </Layout>
);
