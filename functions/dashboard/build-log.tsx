import type { FC } from 'hono/jsx';
import { LIVE_LOG_SCRIPT_URL } from './live-log-script.ts';

/**
 * A build's log on its page: the tail of what is archived so far, server-rendered. While the build
 * runs the page also loads the dashboard's one script (live-log-script.ts), which follows the
 * build's relay over a WebSocket (GET /dashboard/builds/:id/live, the session's) and appends each
 * new line as text after the tail; the page then does not reload every 10 s unless the socket
 * fails, or the browser runs no scripts (docs/operations.md, "A build's log").
 */
export const LOG_LINES_SHOWN = 200;

/** A browser that runs no scripts reloads the live page as before. */
const NOSCRIPT_REFRESH = '<meta http-equiv="refresh" content="10">';

export interface BuildLogProps {
  jobId: string;
  text: string;
  /** The sequence number of the archive's last line: the live script appends only lines after it. */
  lastSeq: number;
  inProgress: boolean;
}

export const BuildLog: FC<BuildLogProps> = ({ jobId, text, lastSeq, inProgress }) => {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const tail = lines.slice(-LOG_LINES_SHOWN);
  const pre = <pre class="json log" id="build-log-tail" data-lines={String(tail.length)} data-last-seq={String(lastSeq)}>{tail.join('\n')}</pre>;
  return (
    <section class="panel" id="build-log-panel" data-live={inProgress ? `/dashboard/builds/${jobId}/live` : undefined}>
      <h2>Build log{inProgress ? ' (live)' : ''}</h2>
      {inProgress ? <p class="muted" id="build-log-state">Reloads every 10 s.</p> : null}
      {tail.length === 0 ? <p class="muted" id="build-log-empty">No lines archived yet.</p> : null}
      {lines.length > tail.length ? <p class="muted">The last {tail.length} of {lines.length} lines; <a href={`/dashboard/builds/${jobId}/log`}>the whole log</a>.</p> : null}
      {tail.length > 0 || inProgress ? pre : null}
      {inProgress ? (
        <>
          {/* The page has no meta refresh while the script runs (it reloads on a failed socket). Raw
              markup: hono/jsx hoists a <meta> element into <head>, out of the <noscript>. */}
          <noscript dangerouslySetInnerHTML={{ __html: NOSCRIPT_REFRESH }} />
          <script src={LIVE_LOG_SCRIPT_URL} defer />
        </>
      ) : null}
    </section>
  );
};
