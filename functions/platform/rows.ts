import { z } from 'zod';

/**
 * Rows of platform.* tables parsed once, beside the statement that reads them, by a small zod
 * schema: a row whose shape is not the schema's (a migration and the job disagree) fails loudly,
 * naming the table and the column, instead of travelling on as a wrong value.
 */

export class PlatformRowError extends Error {
  constructor(table: string, column: string, message: string) {
    super(`${table} row: column ${column} is not what the schema says (${message})`);
    this.name = 'PlatformRowError';
  }
}

/** An integer column: a bigint arrives as a string (postgres.js), an int or a count as a number. */
export const intColumn = z.union([z.number().int(), z.string().regex(/^-?\d+$/)]).transform(Number);

/** One row; a missing row (undefined) is an error too: the statement always returns one. */
export function parseRow<T>(table: string, schema: z.ZodType<T>, row: unknown): T {
  const parsed = schema.safeParse(row);
  if (parsed.success) return parsed.data;
  const [issue] = parsed.error.issues;
  const column = issue?.path.map(String).join('.') || '*';
  throw new PlatformRowError(table, column, row === undefined ? 'no row' : (issue?.message ?? 'malformed'));
}

export function parseRows<T>(table: string, schema: z.ZodType<T>, rows: readonly unknown[]): T[] {
  return rows.map((row) => parseRow(table, schema, row));
}
