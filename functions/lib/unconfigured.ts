import { PermanentError } from '../../queue/errors.ts';

/**
 * A stand-in for an adapter whose secret is not set: every call fails the step permanently with
 * an error naming the missing setting, instead of calling a provider with no credentials.
 */
export function unconfigured<T extends object>(what: string, setting: string): T {
  return new Proxy({} as T, {
    get(_target, property) {
      if (property === 'then') return undefined; // not a thenable
      return () => {
        throw new PermanentError(`${what} is not configured: set ${setting}`);
      };
    },
  });
}
