import { userInfo } from 'node:os';
import type { Sql } from '../../queue/db.ts';
import { listPauses, listRateLimits, pauseClaims, type PauseKind, resumeClaims, resumeRateKey } from '../../queue/index.ts';
import { formatAge, printTable } from './cli.ts';

// The ops CLI's flow-control part (docs/operations.md): what is paused and how full each rate
// key is (part of `inspect`), pausing or resuming a job type or a pool, and ending a rate key's
// pause (a provider's 429) early.

export interface FlowOptions {
  reason?: string;
  by?: string;
}

/** Who paused it when --by is not given: the ops CLI and the operating system's user. */
export function defaultPausedBy(): string {
  try {
    return `ops (${userInfo().username})`;
  } catch {
    return 'ops';
  }
}

export async function printFlowControl(sql: Sql): Promise<void> {
  console.log('paused');
  printTable((await listPauses(sql)).map((p) => ({ kind: p.kind, name: p.name, by: p.pausedBy, since: p.pausedAt, reason: p.reason })));
  console.log();
  await printRateLimits(sql);
}

async function printRateLimits(sql: Sql): Promise<void> {
  console.log('rate limits');
  printTable((await listRateLimits(sql)).map((r) => ({
    key: r.key, limit: `${r.limit} per ${formatAge(r.perMs)}`, started_in_window: r.startedInWindow, queued: r.queued,
    paused_until: r.pausedUntil, pause_reason: r.pauseReason,
  })));
}

function pauseCommand(kind: PauseKind) {
  return {
    usage: `pause-${kind} <${kind}> --reason "why" [--by NAME]`,
    help: kind === 'type' ? 'claims skip the job type until resumed (queued jobs stay, running ones finish)' : "the pool's runners claim nothing until resumed",
    needsName: kind,
    async run(sql: Sql, name: string, o: FlowOptions) {
      const pause = await pauseClaims(sql, { kind, name, pausedBy: o.by ?? defaultPausedBy(), reason: o.reason ?? '' });
      console.log(`paused ${kind} ${pause.name} (by ${pause.pausedBy}: ${pause.reason}); resume with npm run ops -- resume-${kind} ${pause.name}`);
    },
  };
}

function resumeCommand(kind: PauseKind) {
  return {
    usage: `resume-${kind} <${kind}>`,
    help: `claims take the paused ${kind}'s jobs again`,
    needsName: kind,
    async run(sql: Sql, name: string) {
      const pause = await resumeClaims(sql, kind, name);
      console.log(`resumed ${kind} ${pause.name} (paused by ${pause.pausedBy} at ${pause.pausedAt.toISOString()}: ${pause.reason})`);
    },
  };
}

const resumeRateKeyCommand = {
  usage: 'resume-rate-key <key> [--by NAME]',
  help: "end the rate key's pause (a provider's 429) now: its jobs run again, within its limit",
  needsName: 'rate key',
  async run(sql: Sql, key: string, o: FlowOptions) {
    const r = await resumeRateKey(sql, key, o.by ?? defaultPausedBy());
    console.log(`resumed rate key ${r.key} (paused until ${r.pausedUntil.toISOString()}${r.pauseReason ? `: ${r.pauseReason}` : ''}); ${r.jobsDue} job(s) due now`);
  },
};

export const FLOW_COMMANDS = {
  'rate-limits': { usage: 'rate-limits', help: "each rate key: its limit, the starts in its window, its queued jobs, a 429's pause", run: (sql: Sql) => printRateLimits(sql) },
  'resume-rate-key': resumeRateKeyCommand,
  'pause-type': pauseCommand('type'),
  'resume-type': resumeCommand('type'),
  'pause-pool': pauseCommand('pool'),
  'resume-pool': resumeCommand('pool'),
};
