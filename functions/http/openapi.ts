import { OpenAPIHono, type OpenAPIObjectConfigure, type RouteConfig, z } from '@hono/zod-openapi';
import type { Handler } from 'hono';
import type { AppEnv } from './context.ts';
import { errorSchema } from './schemas.ts';

export type Router = OpenAPIHono<AppEnv>;

/**
 * A router whose routes are in the OpenAPI document. A path parameter zod-openapi refuses is thrown
 * to app.onError, which answers it like every other validation failure: 400 invalid_input naming
 * the field (errors.ts), so the document changes no answer.
 */
export function createRouter(): Router {
  return new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw result.error;
    },
  });
}

/**
 * Put `route` in the document and mount `handler` behind the route's middleware (scope, body limit)
 * and its path-parameter validator. The JSON body and the query are validated in the handler with
 * the very schemas the route declares (readJson, `query.parse`), not by zod-openapi: its body
 * validator answers 415 to a body sent without `application/json` (the API reads any body as JSON)
 * and parses before the depth and unstorable-string checks, and its query validator turns a
 * repeated key into an array; each would change an answer.
 */
/** `/v1/jobs/{id}` as Hono spells it (`/v1/jobs/:id`), so a handler's `c.req.param('id')` is typed. */
type HonoPath<P extends string> = P extends `${infer A}{${infer N}}${infer B}` ? `${A}:${N}${HonoPath<B>}` : P;

export function mount<R extends RouteConfig>(router: Router, route: R, handler: Handler<AppEnv, HonoPath<R['path']>>): void {
  const { middleware: _middleware, hide: _hide, ...documented } = route;
  router.openAPIRegistry.registerPath(documented);
  const validated: RouteConfig = { ...route, hide: true, request: route.request?.params ? { params: route.request.params } : undefined };
  router.openapi(validated, handler);
}

/** A required JSON request body: the schema the handler's readJson validates with. */
export function jsonBody(schema: z.ZodType, description?: string) {
  return { required: true, ...(description ? { description } : {}), content: { 'application/json': { schema } } };
}

export function jsonAnswer(schema: z.ZodType, description: string) {
  return { description, content: { 'application/json': { schema } } };
}

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'invalid input: the body, a field or a parameter (error.field names it)',
  401: 'missing or invalid bearer token',
  403: 'the token lacks the scope, or the resource is another account\'s',
  404: 'no such resource',
  409: 'the job is in a state the action does not apply to',
  410: 'gone',
  413: 'the body is larger than the route accepts',
  503: 'not configured, or the database is unavailable (Retry-After)',
};

/** The error answers a route can give, all `{error: {code, message, field?}}`. */
export function errorAnswers(...statuses: number[]) {
  return Object.fromEntries(statuses.map((s) => [s, jsonAnswer(errorSchema, ERROR_DESCRIPTIONS[s] ?? 'error')]));
}

/** The statuses every route behind a bearer token can answer besides its own. */
export const AUTH_ERRORS = [401, 403, 503] as const;

export const bearer = [{ bearer: [] }];

export const idParam = z.object({ id: z.string().min(1).openapi({ description: 'the job id' }) });

/** The document's head: what the API is, and how a caller authenticates. No secret is in it. */
export const DOCUMENT_INFO: OpenAPIObjectConfigure<AppEnv, '/openapi.json'> = {
  openapi: '3.1.0',
  info: {
    title: 'starbase-worker HTTP API',
    version: '1',
    description: 'Durable background jobs over Postgres: enqueue, inspect and operate jobs, and the platform routes (pushes, provisioning, Stripe). See docs/http-api.md.',
  },
  tags: [
    { name: 'jobs', description: 'enqueue and read jobs (enqueue scope)' },
    { name: 'operator', description: 'act on jobs and the engine (admin scope; metrics scope for reads)' },
    { name: 'platform', description: 'the platform jobs: builds, provisioning, billing' },
    { name: 'health', description: 'liveness (no token)' },
  ],
};

/** Serve the document at GET /openapi.json, built from every mounted router's routes. */
export function serveDocument(app: Router): void {
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', {
    type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN, ENQUEUE_TOKEN or METRICS_TOKEN',
  });
  app.doc31('/openapi.json', DOCUMENT_INFO);
}
