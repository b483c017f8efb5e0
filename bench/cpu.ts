import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type postgres from 'postgres';

/**
 * CPU time spent by the Postgres server and by this Node process. Wall-clock jobs/s on a shared
 * 2-core machine moves with whatever else runs; CPU per job barely does, so it is reported too.
 */
export interface CpuSample {
  nodeMs: number;
  /** Null when the server is not on this host (or its pid is unreadable). */
  postgresMs: number | null;
}

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** utime + stime (+ reaped children's) of one process, in clock ticks; null if it is gone. */
function processTicks(pid: number, withChildren: boolean): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state); utime/stime/cutime/cstime are fields 14-17.
    const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]));
    return utime! + stime! + (withChildren ? cutime! + cstime! : 0);
  } catch {
    return null;
  }
}

function parentOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

/**
 * The postmaster (with the CPU of the backends it has reaped) plus its live children: exited
 * connections stay counted, so two samples bracket everything the server did in between.
 */
function clusterTicks(postmaster: number): number | null {
  const own = processTicks(postmaster, true);
  if (own === null) return null;
  let total = own;
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === postmaster) continue;
    if (parentOf(pid) === postmaster) total += processTicks(pid, false) ?? 0;
  }
  return total;
}

/** Finds the server's postmaster pid (superuser only) when it runs on this host. */
export async function postmasterPid(admin: postgres.Sql): Promise<number | null> {
  try {
    const [row] = await admin`select pg_read_file('postmaster.pid') as f`;
    const pid = Number(String(row!.f).split('\n')[0]);
    return Number.isInteger(pid) && existsSync(`/proc/${pid}/stat`) ? pid : null;
  } catch {
    return null;
  }
}

export function sampleCpu(postmaster: number | null): CpuSample {
  const usage = process.cpuUsage();
  const ticks = postmaster === null ? null : clusterTicks(postmaster);
  return { nodeMs: (usage.user + usage.system) / 1000, postgresMs: ticks === null ? null : ticks * TICK_MS };
}

/** CPU ms per 1,000 jobs between two samples. */
export function cpuPerThousand(before: CpuSample, after: CpuSample, jobs: number): { nodeMs: number; postgresMs: number | null } {
  return {
    nodeMs: ((after.nodeMs - before.nodeMs) * 1000) / jobs,
    postgresMs: before.postgresMs === null || after.postgresMs === null ? null : ((after.postgresMs - before.postgresMs) * 1000) / jobs,
  };
}

/**
 * CPU ticks of a process and every live process below it, by role: `workerd` (the Worker's
 * runtime), `wrangler` (wrangler dev's Node process: the dev server, its proxy and log printing),
 * and `other` (the `npm start` script itself with the sandbox providers, esbuild). A process that
 * exited in between is not counted.
 */
export function processTreeTicks(root: number): Record<'workerd' | 'wrangler' | 'other', number> {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const parent = parentOf(pid);
    if (parent === null) continue;
    const list = children.get(parent) ?? [];
    list.push(pid);
    children.set(parent, list);
  }
  const totals = { workerd: 0, wrangler: 0, other: 0 };
  const walk = (pid: number) => {
    const ticks = processTicks(pid, false);
    if (ticks !== null) totals[roleOf(pid)] += ticks;
    for (const child of children.get(pid) ?? []) walk(child);
  };
  walk(root);
  return totals;
}

function roleOf(pid: number): 'workerd' | 'wrangler' | 'other' {
  try {
    if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'workerd') return 'workerd';
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('wrangler') ? 'wrangler' : 'other';
  } catch {
    return 'other';
  }
}

/** Process-tree CPU ms per 1,000 jobs between two samples of processTreeTicks. */
export function treeCpuPerThousand(
  before: Record<string, number>,
  after: Record<string, number>,
  jobs: number,
): Record<string, number> {
  return Object.fromEntries(Object.keys(after).map((k) => [k, (((after[k]! - (before[k] ?? 0)) * TICK_MS) * 1000) / jobs]));
}
