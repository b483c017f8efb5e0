import type { Context } from 'hono';
import type { WorkerEnv } from '../config.ts';
import { openInvocation, type Invocation } from '../invocation.ts';

export type AppEnv = {
  Bindings: WorkerEnv;
  Variables: {
    invocation?: Promise<Invocation>;
    /** Set by an accepted enqueue: drain in waitUntil after the response. */
    kick?: boolean;
  };
};

/** The request's invocation (database client, registry, config), opened on first use. */
export function invocationOf(c: Context<AppEnv>): Promise<Invocation> {
  let inv = c.get('invocation');
  if (!inv) {
    inv = openInvocation(c.env);
    c.set('invocation', inv);
  }
  return inv;
}
