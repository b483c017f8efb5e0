import type { FC } from 'hono/jsx';
import type { ScheduleReport } from '../../queue/index.ts';
import { JobLink, StatusBadge, Time, time } from './components.tsx';
import { Layout } from './layout.tsx';
import { TopBar, type Lease } from './pages.tsx';

export interface SchedulesPageData {
  now: Date;
  csrf: string;
  lease: Lease;
  schedules: ScheduleReport[];
  graceMs: number;
}

const Missed: FC<{ s: ScheduleReport; now: Date }> = ({ s, now }) =>
  s.missed === 0 ? (
    <span class="muted">none</span>
  ) : (
    <span class="status status-failed" data-missed={String(s.missed)} title={s.missedSlots.map((d) => time(d)).join(', ')}>
      {s.missed}{s.missedMore ? '+' : ''}
    </span>
  );

/** Each cron schedule: its spec, next slot, last success, the slots it missed and its newest slots' jobs. */
export const SchedulesPage: FC<SchedulesPageData> = (d) => (
  <Layout title="Schedules" refreshSeconds={30} header={<TopBar csrf={d.csrf} lease={d.lease} now={d.now} />}>
    <section class="panel" id="schedules">
      <h2>Schedules ({d.schedules.length})</h2>
      <p class="muted">A slot is missed when it was due over {Math.round(d.graceMs / 60_000)} min ago (the grace) and neither it nor a later slot has succeeded: the schedule_missed alert fires on the same rule. Times are UTC.</p>
      <table>
        <thead><tr><th>schedule</th><th>cron</th><th>job type</th><th>next slot</th><th>last slot</th><th>last success</th><th>missed</th><th>newest slots</th></tr></thead>
        <tbody>
          {d.schedules.map((s) => (
            <tr data-schedule={s.name} class={s.missed > 0 || s.invalid ? 'row-failed' : undefined}>
              <td>{s.name}{s.defined ? null : <span class="muted"> (no longer defined)</span>}</td>
              <td class="mono">{s.cron}{s.invalid ? <div class="error" data-invalid="">{s.invalid}</div> : null}</td>
              <td>{s.type}</td>
              <td data-next-slot={s.nextSlotAt?.toISOString() ?? ''}>{s.nextSlotAt ? <>{time(s.nextSlotAt)} (<Time at={s.nextSlotAt} now={d.now} />)</> : '–'}</td>
              <td>{time(s.lastSlotAt)}</td>
              <td data-last-success={s.lastSuccessSlotAt?.toISOString() ?? ''}>
                {s.lastSuccessSlotAt ? <>slot {time(s.lastSuccessSlotAt)}, done <Time at={s.lastSuccessAt} now={d.now} /></> : <span class="muted">never</span>}
              </td>
              <td>
                <Missed s={s} now={d.now} />
                {s.missedSlots.length ? <div class="muted mono" data-missed-slots="">{s.missedSlots.map((m) => time(m)).join(', ')}{s.missed > s.missedSlots.length ? ', …' : ''}</div> : null}
              </td>
              <td>
                {s.recent.length === 0 ? <span class="muted">none yet</span> : null}
                {s.recent.map((r) => (
                  <div data-slot={r.slotAt.toISOString()}>
                    <span class="mono">{time(r.slotAt)}</span> <JobLink id={r.jobId} /> {r.status ? <StatusBadge status={r.status} /> : <span class="muted">pruned</span>}
                  </div>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  </Layout>
);
