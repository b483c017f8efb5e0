/**
 * The dashboard's one script: a running build's page follows the build's log over the relay's
 * WebSocket (GET /dashboard/builds/:id/live) instead of reloading every 10 s.
 *
 * Why it stays safe to run a script beside a build's output: every line is added as a text node
 * (createTextNode), never parsed as HTML, so a line holding `<img onerror=…>` stays text; the CSP
 * allows scripts from this origin only (no inline script, no handler attribute), requires Trusted
 * Types, so an innerHTML assignment would throw instead of parsing, and every other answer of the
 * origin is nosniff with a non-script type, so nothing else here can be loaded as a script.
 *
 * Why it is plain JavaScript in a string: it runs in the browser, not in workerd, and a bundled
 * function's toString() would carry the bundler's helpers (esbuild's keepNames `__name` calls).
 * test/e2e/dashboard.test.ts runs it in Chromium.
 *
 * Reloading (the simplest rule that keeps the page live whatever fails): the server leaves the
 * meta refresh off a page that loads this script, with a <noscript> refresh for a browser that
 * runs no scripts; once running, the script owns reloading. While the socket is open nothing
 * reloads; when it closes without the build's end message (a failed handshake, a finished build's
 * 410, a dropped connection) the page reloads after 10 s, as every live page does, and the reload
 * renders the archive's tail afresh and opens a new socket. A removed meta refresh could not be
 * relied on: browsers keep a refresh they have already scheduled.
 *
 * De-duplication: the server-rendered tail ends at line `data-last-seq`; the relay first sends its
 * backlog (which may overlap it), so a line at or below the last shown is dropped. A jump in the
 * sequence (a poll whose relay publish failed: the archive has those lines, the relay not) is
 * shown as a note naming the missing lines rather than hidden.
 */
export const LIVE_LOG_SCRIPT = String.raw`(function () {
  'use strict';
  var panel = document.getElementById('build-log-panel');
  var pre = document.getElementById('build-log-tail');
  var state = document.getElementById('build-log-state');
  if (!panel || !pre || !state || !panel.dataset.live) return;
  var lastSeq = Number(pre.dataset.lastSeq) || 0;
  var hasText = pre.textContent !== '';
  var ended = false;
  var reloading = false;

  function say(text) {
    state.textContent = text;
  }
  function append(text) {
    pre.appendChild(document.createTextNode((hasText ? '\n' : '') + text));
    hasText = true;
    var empty = document.getElementById('build-log-empty');
    if (empty) empty.remove();
  }
  function reloadSoon(why) {
    if (ended || reloading) return;
    reloading = true;
    say(why + ': reloading in 10 s');
    setTimeout(function () { location.reload(); }, 10000);
  }
  function showLines(lines) {
    for (var i = 0; i < lines.length; i++) {
      var line = lines[i];
      if (!line || typeof line.seq !== 'number' || line.seq <= lastSeq) continue;
      if (line.seq > lastSeq + 1) append('[lines ' + (lastSeq + 1) + '-' + (line.seq - 1) + ' were not relayed: the whole log has them]');
      append(String(line.text));
      lastSeq = line.seq;
    }
    pre.dataset.lastSeq = String(lastSeq);
  }
  function showEnd(outcome) {
    ended = true;
    say('build ended: ' + String(outcome) + ' ');
    var link = document.createElement('a');
    link.href = location.pathname;
    link.textContent = 'show its final state';
    state.appendChild(link);
  }

  var url = new URL(panel.dataset.live, location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  var socket;
  try {
    socket = new WebSocket(url.href);
  } catch (error) {
    reloadSoon('the live log could not connect');
    return;
  }
  say('connecting to the live log');
  socket.addEventListener('open', function () { say('live: lines appear as the build writes them'); });
  socket.addEventListener('message', function (event) {
    var message;
    try { message = JSON.parse(event.data); } catch (error) { return; }
    if (message && message.type === 'lines' && Array.isArray(message.lines)) showLines(message.lines);
    else if (message && message.type === 'end') showEnd(message.outcome);
  });
  socket.addEventListener('close', function () { reloadSoon('the live log closed'); });
})();
`;

/** FNV-1a, 32 bits: a version tag for the script's URL, computed once per isolate (no async digest needed). */
function versionOf(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return (hash >>> 0).toString(16).padStart(8, '0');
}

export const LIVE_LOG_SCRIPT_PATH = '/dashboard/assets/live-log.js';
export const LIVE_LOG_SCRIPT_VERSION = versionOf(LIVE_LOG_SCRIPT);
/**
 * What a page loads: the version in the URL lets the script be cached for a year (a new script is
 * a new URL), and the route serves the long cache only to the current version.
 */
export const LIVE_LOG_SCRIPT_URL = `${LIVE_LOG_SCRIPT_PATH}?v=${LIVE_LOG_SCRIPT_VERSION}`;
