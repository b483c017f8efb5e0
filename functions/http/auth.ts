import type { MiddlewareHandler } from 'hono';
import { checkTokens, ConfigError, type WorkerEnv } from '../config.ts';
import { HttpError } from './errors.ts';

export type Scope = 'enqueue' | 'admin' | 'metrics';

/** Tokens are secrets; an admin token carries every scope. A token too short to be one is refused (503). */
function configuredTokens(env: WorkerEnv): Array<{ token: string; scopes: Scope[] }> {
  try {
    checkTokens(env);
  } catch (error) {
    if (error instanceof ConfigError) throw new HttpError(503, 'not_configured', `refusing to run: ${error.message}`);
    throw error;
  }
  const tokens: Array<{ token: string; scopes: Scope[] }> = [];
  if (env.ADMIN_TOKEN) tokens.push({ token: env.ADMIN_TOKEN, scopes: ['admin', 'enqueue', 'metrics'] });
  if (env.ENQUEUE_TOKEN) tokens.push({ token: env.ENQUEUE_TOKEN, scopes: ['enqueue'] });
  if (env.METRICS_TOKEN) tokens.push({ token: env.METRICS_TOKEN, scopes: ['metrics'] });
  return tokens;
}

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)));
}

/**
 * Compare in constant time: both sides are hashed to 32 bytes first, so neither the length nor
 * the position of the first differing byte of a guessed token shows in the timing.
 */
export async function tokensEqual(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([digest(presented), digest(expected)]);
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** The scopes of the presented bearer token (every configured token is compared, no early exit). */
export async function scopesOf(env: WorkerEnv, authorization: string | undefined): Promise<Scope[] | null> {
  const tokens = configuredTokens(env);
  if (tokens.length === 0) {
    throw new HttpError(503, 'not_configured', 'no API token is configured (set ADMIN_TOKEN with `wrangler secret put ADMIN_TOKEN`): refusing to run open');
  }
  const match = /^Bearer ([\x21-\x7e]{1,512})$/.exec(authorization ?? '');
  if (!match) return null;
  let scopes: Scope[] | null = null;
  for (const t of tokens) if (await tokensEqual(match[1]!, t.token)) scopes = t.scopes;
  return scopes;
}

/** Require a bearer token carrying one of `allowed`. */
export function requireScope(...allowed: Scope[]): MiddlewareHandler {
  return async (c, next) => {
    const scopes = await scopesOf(c.env as WorkerEnv, c.req.header('authorization'));
    if (!scopes) {
      c.header('WWW-Authenticate', 'Bearer');
      throw new HttpError(401, 'unauthorized', 'missing or invalid bearer token');
    }
    if (!allowed.some((s) => scopes.includes(s))) {
      throw new HttpError(403, 'forbidden', `this token lacks the ${allowed.join(' or ')} scope`);
    }
    await next();
  };
}
