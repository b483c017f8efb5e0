import { connect } from '../queue/db.ts';
import { queueDepth, readLeaderLease, runningJobs } from '../queue/index.ts';
import { formatAge, printTable, resolveDatabaseUrl } from './lib/cli.ts';

// `npm run inspect`: the quick-check view — depth by status and type, the leader lease,
// running jobs with owner and age, and stuck jobs (a step running over 2 h).
const STUCK_MS = 2 * 3_600_000;
const sql = connect(resolveDatabaseUrl(), { max: 1 });
try {
  console.log('queue depth');
  printTable((await queueDepth(sql)).map((d) => ({ status: d.status, type: d.type, jobs: d.count })));
  const lease = await readLeaderLease(sql);
  console.log('\nleader lease');
  printTable([{ holder: lease.holder, generation: lease.generation, acquired: lease.acquiredAt, expires: lease.expiresAt,
    expired: lease.expiresAt ? lease.expiresAt.getTime() < Date.now() : null }]);
  const running = await runningJobs(sql);
  console.log('\nrunning');
  printTable(running.map((r) => ({ id: r.id, type: r.type, step: r.step, owner: r.owner, age: formatAge(r.runningForMs), lease_until: r.lockedUntil })));
  console.log('\nstuck (running > 2h)');
  printTable(running.filter((r) => r.runningForMs > STUCK_MS).map((r) => ({ id: r.id, type: r.type, owner: r.owner, age: formatAge(r.runningForMs) })));
} finally {
  await sql.end();
}
