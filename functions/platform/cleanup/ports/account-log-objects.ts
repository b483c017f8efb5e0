/** An account's log objects (build logs in R2 or Spaces, as LOG_ARCHIVE says): what the cleanup job's purge deletes. */
export interface AccountLogObjects {
  /** Up to `limit` keys of the account's objects. */
  list(accountId: string, limit: number): Promise<string[]>;
  /** Delete objects; keys that are gone are not an error. */
  delete(keys: string[]): Promise<void>;
}
