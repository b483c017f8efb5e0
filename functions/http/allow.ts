/** A route as Hono lists it in `app.routes`: middleware shows as method `ALL`. */
export interface ListedRoute {
  method: string;
  path: string;
}

/** A Hono path pattern (`/v1/jobs/:id/cancel`, `:id{[0-9]+}`, `*`) as an anchored RegExp. */
function patternOf(path: string): RegExp {
  const source = path
    .split('/')
    .map((segment) => {
      if (segment === '*') return '.*';
      const param = /^:[A-Za-z0-9_]+(?:\{(.+)\})?$/.exec(segment);
      if (param) return param[1] ? `(?:${param[1]})` : '[^/]+';
      return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('/');
  return new RegExp(`^${source}$`);
}

/**
 * The methods a path has, read from the app's own routes, for a 405's `Allow`: a wrong method on
 * a known path is the caller's mistake to correct, not a missing resource. HEAD is listed with GET
 * because Hono answers a HEAD with the GET route. Null for a path no route has: that stays a 404.
 * Built once per app, after every route is mounted.
 */
export function methodsByPath(routes: readonly ListedRoute[]): (path: string) => string[] | null {
  const compiled = routes
    .filter((r) => r.method !== 'ALL')
    .map((r) => ({ method: r.method.toUpperCase(), pattern: patternOf(r.path) }));
  return (path) => {
    const methods = new Set(compiled.filter((r) => r.pattern.test(path)).map((r) => r.method));
    if (methods.size === 0) return null;
    if (methods.has('GET')) methods.add('HEAD');
    const order = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
    return [...methods].sort((a, b) => order.indexOf(a) - order.indexOf(b));
  };
}
