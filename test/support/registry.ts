import { JobRegistry, sampleJobTypes, type Runner } from '../../queue/index.ts';
import type { Sql } from '../../queue/db.ts';

/** A runner over the sample types, quiet, for engine tests. */
export function sampleRunner(sql: Sql, overrides: Partial<Runner> = {}): Runner {
  return { sql, registry: new JobRegistry(sampleJobTypes), workerId: 'test-runner', concurrency: 5, ...overrides };
}
