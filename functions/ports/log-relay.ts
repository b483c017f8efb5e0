import type { LogLine } from './build-service.ts';

/**
 * Live viewers of a build's log (the dashboard, `GET /v1/builds/:id/logs`). `buildId` is the build
 * job's id, the id the logs route takes. Lines carry their sequence numbers, so a viewer that is
 * sent a line twice (a re-polled step publishes again) can drop the repeat.
 */
export interface LogRelay {
  publish(buildId: string, lines: LogLine[]): Promise<void>;
}
