import { OwnershipError } from '../lib/tenancy.ts';
import { HttpError } from './errors.ts';

/** An ownership refusal as the API answers it: 404 (unknown account or service) or 403 (another account's). */
export function ownershipToHttp(error: unknown): never {
  if (error instanceof OwnershipError) {
    throw new HttpError(error.status, error.status === 404 ? 'not_found' : 'forbidden', error.message, error.field);
  }
  throw error;
}
