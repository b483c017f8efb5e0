// Lets Node import the Worker's modules to read what they declare (the OpenAPI document), without
// running them: `cloudflare:*` exists only in workerd, so each is a stub that refuses to be used.
import { register } from 'node:module';

const stub = `
export function connect() { throw new Error('cloudflare:sockets is only in workerd'); }
export class DurableObject { constructor() { throw new Error('cloudflare:workers is only in workerd'); } }
export const env = {};
`;

const hooks = `
export async function resolve(specifier, context, next) {
  if (specifier.startsWith('cloudflare:')) return { url: 'data:text/javascript,' + encodeURIComponent(${JSON.stringify(stub)}), shortCircuit: true };
  return next(specifier, context);
}
`;

register('data:text/javascript,' + encodeURIComponent(hooks));
