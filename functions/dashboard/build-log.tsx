import type { FC } from 'hono/jsx';

/**
 * A build's log on its page: the tail of what is archived so far, server-rendered. While the build
 * runs the page reloads every 10 s like every live page, so the tail follows the build a poll
 * behind (the build archives its new lines each poll step). Why not the relay's WebSocket: a
 * browser's WebSocket cannot send the bearer token /v1/builds/:id/logs takes, and a script on the
 * page would end the dashboard's no-script CSP, the guard that makes a hostile line in a build's
 * output inert (docs/operations.md, "A build's log").
 */
export const LOG_LINES_SHOWN = 200;

export const BuildLog: FC<{ jobId: string; text: string; inProgress: boolean }> = ({ jobId, text, inProgress }) => {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const tail = lines.slice(-LOG_LINES_SHOWN);
  return (
    <section class="panel" id="build-log-panel">
      <h2>Build log{inProgress ? ' (live: reloads every 10 s)' : ''}</h2>
      {tail.length === 0 ? (
        <p class="muted">No lines archived yet.</p>
      ) : (
        <>
          {lines.length > tail.length ? <p class="muted">The last {tail.length} of {lines.length} lines; <a href={`/dashboard/builds/${jobId}/log`}>the whole log</a>.</p> : null}
          <pre class="json log" id="build-log-tail" data-lines={String(tail.length)}>{tail.join('\n')}</pre>
        </>
      )}
    </section>
  );
};
