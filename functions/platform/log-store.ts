import type { Queryable } from '../../queue/db.ts';
import { SpacesClient, type SpacesSettings } from '../adapters/spaces-client.ts';
import { R2LogArchive, type LogBucket } from './build/adapters/r2-log-archive.ts';
import { SpacesLogArchive } from './build/adapters/spaces-log-archive.ts';
import type { LogArchive } from './build/ports/log-archive.ts';
import { R2AccountLogObjects, type DeletableBucket } from './cleanup/adapters/r2-account-logs.ts';
import { SpacesAccountLogObjects } from './cleanup/adapters/spaces-account-logs.ts';
import type { AccountLogObjects } from './cleanup/ports/account-log-objects.ts';

/**
 * The one place that picks the build-log store (LOG_ARCHIVE): the build job writes through it,
 * the logs route reads through it and the cleanup purge deletes through it, so the three can
 * never disagree about where a build's log is.
 */

/** Where build logs are archived (config.ts reads it from LOG_ARCHIVE and SPACES_*). */
export type LogStoreConfig = { store: 'r2' } | { store: 'spaces'; spaces: SpacesSettings };

/** The R2 binding, declared structurally (the Worker passes its env): used when the store is R2. */
export interface LogStoreBindings {
  BUILD_LOGS: LogBucket & DeletableBucket;
}

export function logArchiveOf(bindings: LogStoreBindings, config: LogStoreConfig): LogArchive {
  return config.store === 'spaces' ? new SpacesLogArchive(new SpacesClient(config.spaces)) : new R2LogArchive(bindings.BUILD_LOGS);
}

export function accountLogObjectsOf(sql: Queryable, bindings: LogStoreBindings, config: LogStoreConfig): AccountLogObjects {
  return config.store === 'spaces' ? new SpacesAccountLogObjects(sql, new SpacesClient(config.spaces)) : new R2AccountLogObjects(sql, bindings.BUILD_LOGS);
}
