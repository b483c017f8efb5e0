import type { Child, FC } from 'hono/jsx';

const STYLE = `
:root { color-scheme: light; --fg: #111827; --muted: #6b7280; --line: #e5e7eb; --bg: #f9fafb; --card: #fff; --accent: #1d4ed8; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header.top { display: flex; align-items: center; gap: 16px; padding: 10px 24px; background: #111827; color: #f9fafb; }
header.top a { color: #f9fafb; text-decoration: none; font-weight: 600; }
header.top .lease { color: #d1d5db; font-size: 13px; }
header.top nav { display: flex; gap: 14px; } header.top nav a { font-weight: 500; color: #d1d5db; }
pre.log { max-height: none; white-space: pre-wrap; } .last-error { color: #991b1b; }
header.top form { margin-left: auto; } header.top form + form { margin-left: 0; }
main { padding: 20px 24px; max-width: 1280px; margin: 0 auto; }
h1 { font-size: 20px; margin: 0 0 12px; } h2 { font-size: 15px; margin: 24px 0 8px; }
a { color: var(--accent); }
.muted { color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(140px, 1fr)); gap: 12px; }
a.card { color: inherit; text-decoration: none; } a.card:hover { border-color: #9ca3af; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; border-top: 4px solid var(--c, #9ca3af); }
.card .n { font-size: 26px; font-weight: 650; } .card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 20px; } @media (max-width: 900px) { .grid2 { grid-template-columns: 1fr; } }
section.panel { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; margin-top: 16px; }
section.panel h2 { margin-top: 18px; } section.panel > h2:first-child { margin-top: 0; }
table { border-collapse: collapse; width: 100%; } th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
.status { display: inline-block; padding: 1px 8px; border-radius: 999px; color: #fff; font-size: 12px; font-weight: 600; }
.status-queued { background: #2563eb; } .status-running { background: #d97706; } .status-done { background: #16a34a; }
.status-failed { background: #dc2626; } .status-cancelled { background: #6b7280; } .status-oom_killed { background: #7c3aed; }
tr.row-failed td, tr.row-oom_killed td { background: #fef2f2; } tr.row-running td { background: #fffbeb; }
pre.json { background: #f3f4f6; padding: 8px 10px; border-radius: 6px; overflow: auto; max-height: 320px; margin: 0; font-size: 12px; }
form.inline { display: inline; } .actions { display: flex; gap: 8px; flex-wrap: wrap; align-items: center; margin: 8px 0 4px; }
button { font: inherit; padding: 5px 12px; border-radius: 6px; border: 1px solid #d1d5db; background: #fff; cursor: pointer; }
button.danger { border-color: #dc2626; color: #b91c1c; } button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
input, select, textarea { font: inherit; padding: 4px 8px; border: 1px solid #d1d5db; border-radius: 6px; }
.notice { padding: 8px 12px; border-radius: 6px; background: #ecfdf5; border: 1px solid #a7f3d0; margin-bottom: 12px; }
.error { padding: 8px 12px; border-radius: 6px; background: #fef2f2; border: 1px solid #fecaca; margin-bottom: 12px; }
.timeline { list-style: none; padding: 0; margin: 0; } .timeline li { padding: 6px 0; border-bottom: 1px solid var(--line); }
.timeline .kind { font-weight: 600; margin: 0 8px; }
dl.fields { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; } dl.fields dt { color: var(--muted); }
figure.chart { margin: 0; } figure.chart svg { width: 100%; height: auto; }
svg .axis { stroke: #9ca3af; } svg .grid { stroke: #e5e7eb; stroke-dasharray: 4 4; } svg .tick { fill: #6b7280; font-size: 11px; }
.legend { margin-right: 16px; font-size: 12px; } .legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; }
.login { max-width: 380px; margin: 12vh auto; background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 24px; }
.login input { width: 100%; margin: 8px 0 12px; }
`;

export interface LayoutProps {
  title: string;
  /** Seconds between automatic reloads (live numbers without scripts); none when absent. */
  refreshSeconds?: number;
  header?: Child;
  children?: Child;
}

export const Layout: FC<LayoutProps> = ({ title, refreshSeconds, header, children }) => (
  <html lang="en">
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      {refreshSeconds ? <meta http-equiv="refresh" content={String(refreshSeconds)} /> : null}
      <title>{title} · starbase-worker</title>
      <style dangerouslySetInnerHTML={{ __html: STYLE }} />
    </head>
    <body>
      {header}
      <main>{children}</main>
    </body>
  </html>
);

/**
 * Every dashboard answer: no caching, no framing, forms only to this origin, and one script: the
 * build page's live log, loaded from this origin (`script-src 'self'`: no inline script, no
 * handler attribute, nothing from elsewhere), whose socket goes back to this origin only
 * (`connect-src 'self'`). Trusted Types are required with no policy allowed, so an HTML sink
 * (innerHTML and its kin) throws rather than parse a string: the script adds a build's lines as
 * text nodes, and a hostile line stays text. Every other answer of the origin is nosniff with a
 * non-script type, so `'self'` admits no other script.
 */
export const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; connect-src 'self'; require-trusted-types-for 'script'; trusted-types 'none'; " +
    "style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};
