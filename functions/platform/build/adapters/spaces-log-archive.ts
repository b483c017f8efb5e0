import { PermanentError } from '../../../../queue/errors.ts';
import type { SpacesClient } from '../../../adapters/spaces-client.ts';
import type { ArchivedLog } from '../ports/log-archive.ts';
import { ConditionalLogArchive, type LogObjectStore, type StoredLog } from './conditional-log-archive.ts';

/** S3 lowercases metadata names; R2's custom metadata keeps `lastSeq` as given. */
const LAST_SEQ = 'lastseq';
const CONTENT_TYPE = 'text/plain; charset=utf-8';

/** Outside `builds/`, so neither a lifecycle rule on the logs nor the purge touches it. */
export const PROBE_KEY = '_starbase/conditional-write-probe';

/**
 * Buckets whose server was seen to refuse a write with `If-None-Match: *` over an existing
 * object, per isolate: the check costs one PutObject once per isolate and bucket (two the first
 * time the bucket is ever used).
 */
const honoured = new Map<string, Promise<void>>();

/**
 * The archive's object calls over Spaces' S3 API: PutObject with `If-None-Match: *` to create and
 * `If-Match: <etag>` to replace, 412 meaning another writer won.
 *
 * DigitalOcean does not document conditional PutObject for Spaces (docs/platform-jobs.md). A
 * server that ignored the headers would let a writer that lost its lease overwrite a longer log
 * with a shorter one, and nothing read afterwards could tell (the longer one is gone). So before
 * its first write the archive checks that this server refuses a conditional write it must refuse,
 * and if it does not, it writes nothing and fails the step permanently, naming the problem.
 */
export class SpacesLogObjects implements LogObjectStore {
  constructor(private readonly client: SpacesClient) {}

  async get(key: string): Promise<StoredLog | null> {
    const object = await this.client.getObject(key);
    if (!object) return null;
    return { text: object.body, lastSeq: Number(object.metadata[LAST_SEQ] ?? 0), etag: object.etag };
  }

  async putIf(key: string, log: ArchivedLog, etag: string | null): Promise<boolean> {
    await this.checkConditionalWrites();
    const outcome = await this.client.putObject(key, log.text, {
      contentType: CONTENT_TYPE,
      metadata: { [LAST_SEQ]: String(log.lastSeq) },
      ...(etag !== null ? { ifMatch: etag } : { ifNoneMatch: '*' as const }),
    });
    return outcome.written;
  }

  private checkConditionalWrites(): Promise<void> {
    const { endpoint, bucket } = this.client.settings;
    const id = `${endpoint} ${bucket}`;
    let check = honoured.get(id);
    if (!check) {
      check = this.probe();
      honoured.set(id, check);
      // a check that could not finish (a network error, a 5xx) is tried again next time
      check.catch(() => honoured.delete(id));
    }
    return check;
  }

  private async probe(): Promise<void> {
    const createOnly = () => this.client.putObject(PROBE_KEY, 'conditional write probe\n', { contentType: CONTENT_TYPE, metadata: {}, ifNoneMatch: '*' });
    // refused: the probe object exists and the server enforced the header
    if (!(await createOnly()).written) return;
    // written: the first probe ever, or a server ignoring the header; now the object surely exists
    if (!(await createOnly()).written) return;
    const { endpoint, bucket } = this.client.settings;
    throw new PermanentError(
      `Spaces at ${endpoint} (bucket ${bucket}) ignored If-None-Match: * on PutObject: without conditional writes a build worker that lost its lease could shorten a log, so nothing is archived there; use LOG_ARCHIVE = "r2" or a store that enforces S3 conditional writes`,
    );
  }
}

/** One Spaces object per build (see ConditionalLogArchive), keyed like R2's: builds/<buildJobId>.log. */
export class SpacesLogArchive extends ConditionalLogArchive {
  constructor(client: SpacesClient) {
    super(new SpacesLogObjects(client));
  }
}
