// Maintenance: one runOnce service per pass, run by one scheduler with one clock.
export * from './service.ts';
export * from './rescue.ts';
export * from './prune.ts';
export * from './stuck.ts';
export * from './deadlines.ts';
export * from './unclaimed.ts';
export * from './upkeep.ts';
export * from './schedules.ts';
export * from './alerts.ts';
export * from './scheduler.ts';
