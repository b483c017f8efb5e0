// The durable job engine: plain TypeScript over a postgres.js Sql. No Cloudflare or Hono imports,
// so it runs unchanged in Node (tests, CLI, benchmarks) and inside the Worker.
export * from './db.ts';
export * from './errors.ts';
export * from './job.ts';
export * from './enqueue.ts';
export * from './claim.ts';
export * from './settle.ts';
export * from './manual.ts';
export * from './maintenance/index.ts';
export * from './leader.ts';
export * from './alerts.ts';
export * from './registry.ts';
export * from './children.ts';
export * from './runner.ts';
export * from './inspect.ts';
export * from './progress.ts';
export * from './jobs-query.ts';
export * from './dashboard-read.ts';
export * from './dashboard-sessions.ts';
export * from './metrics.ts';
export * from './schedules.ts';
export * from './upkeep.ts';
export * from './alert-rows.ts';
export { sampleJobTypes } from './samples.ts';
