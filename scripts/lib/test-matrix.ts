/**
 * The line that puts a test file in the Postgres matrix (`npm run test:pg15`, `npm run test:pg18`):
 * `// Postgres matrix: <reason>` near its top, saying why the file must pass on every major.
 */
const MATRIX_MARK = /^\s*(?:\/\/|\*) Postgres matrix: \S/m;

/** Whether a test file's text carries the mark. */
export const inPostgresMatrix = (text: string): boolean => MATRIX_MARK.test(text);
