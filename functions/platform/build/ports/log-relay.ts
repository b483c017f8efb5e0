import type { LogLine } from './build-service.ts';

export type BuildOutcome = 'succeeded' | 'failed' | 'cancelled';

/**
 * Live viewers of a build's log (the dashboard, `GET /v1/builds/:id/logs`). `buildId` is the build
 * job's id, the id the logs route takes. Lines carry their sequence numbers, so a viewer that is
 * sent a line twice (a re-polled step publishes again) can drop the repeat.
 */
export interface LogRelay {
  publish(buildId: string, lines: LogLine[]): Promise<void>;
  /** The build ended: viewers are told and disconnected (best effort, like publish). */
  end?(buildId: string, outcome: BuildOutcome): Promise<void>;
}
