/**
 * The key pair the sandbox's Spaces accepts (and `npm start` and the tests configure): a dev pair
 * that opens nothing outside the sandbox. The sandbox refuses any other key, and any request not
 * signed with this secret, as Spaces would (403).
 */
export const SANDBOX_SPACES_KEYS = {
  accessKeyId: 'DO00SANDBOXSPACESKEY',
  secretAccessKey: 'sandbox-spaces-secret-0123456789abcdefghij',
} as const;

/** The sandbox's Spaces endpoint under its URL: buckets are path-style below it (`/spaces/<bucket>/<key>`). */
export const SANDBOX_SPACES_PATH = '/spaces';
export const SANDBOX_SPACES_REGION = 'sbx1';
