import { connect } from '../queue/db.ts';
import { enqueueBatch, type EnqueueInput, type JsonObject } from '../queue/index.ts';
import { databaseConnectionError, fail, parseCli, resolveDatabaseUrl } from './lib/cli.ts';

const USAGE = `usage: npm run produce -- [--type T] [--count N] [--payload JSON] [--priority P]
Enqueues N jobs of type T (a sample payload for the sample types unless --payload) over
DATABASE_URL, or the running \`npm start\` stack's database.

  --type T        the job type (default uppercase)
  --count N       how many, 1 to 1000000 (default 1), in batches of 1000
  --payload JSON  every job's payload
  --priority P    lower runs first: 10 urgent, 50 normal (the default), 100 low
  -h, --help      this help`;

const { values } = parseCli({
  command: 'npm run produce',
  usage: USAGE,
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

const url = resolveDatabaseUrl();
const sql = connect(url, { max: 1 });
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
  if (databaseConnectionError(error, url)) throw error; // one line, exit 1 (exitOnDatabaseError)
  fail((error as Error).message);
} finally {
  await sql.end();
}
