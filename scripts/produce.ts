import { parseArgs } from 'node:util';
import { connect } from '../queue/db.ts';
import { enqueueBatch, type EnqueueInput, type JsonObject } from '../queue/index.ts';
import { fail, resolveDatabaseUrl } from './lib/cli.ts';

// `npm run produce -- --type uppercase --count N [--payload JSON] [--priority P]`
const { values } = parseArgs({
  options: {
    type: { type: 'string', default: 'uppercase' },
    count: { type: 'string', default: '1' },
    payload: { type: 'string' },
    priority: { type: 'string' },
  },
});
const count = Number(values.count);
if (!Number.isInteger(count) || count < 1 || count > 1_000_000) fail(`--count must be an integer from 1 to 1000000, got ${values.count}`);
let payload: JsonObject | undefined;
if (values.payload !== undefined) {
  try {
    payload = JSON.parse(values.payload) as JsonObject;
  } catch {
    fail(`--payload is not valid JSON: ${values.payload}`);
  }
}
const samplePayload = (i: number): JsonObject =>
  payload ?? ({ uppercase: { text: `job ${i}` }, countdown: { n: 3 }, fail: {} } as Record<string, JsonObject>)[values.type] ?? {};
const priority = values.priority === undefined ? undefined : Number(values.priority);

const sql = connect(resolveDatabaseUrl(), { max: 1 });
try {
  let made = 0;
  for (let start = 0; start < count; start += 1000) {
    const batch: EnqueueInput[] = Array.from({ length: Math.min(1000, count - start) }, (_, k) => ({
      type: values.type,
      payload: samplePayload(start + k),
      ...(priority === undefined ? {} : { priority }),
    }));
    made += (await enqueueBatch(sql, batch)).length;
  }
  console.log(`enqueued ${made} ${values.type} job(s)`);
} catch (error) {
  fail((error as Error).message);
} finally {
  await sql.end();
}
