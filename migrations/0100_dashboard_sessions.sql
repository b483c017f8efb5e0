-- Dashboard login sessions, kept server-side. The cookie used to be the whole session (signed,
-- valid until its 12 h expiry), so logging out only deleted the browser's copy: a stolen cookie
-- kept working. Now the cookie names a row here, and a session is live only while its row exists,
-- its absolute expiry has not passed and it has been used within the idle timeout:
--   logout               deletes the session's row
--   log out everywhere   deletes every row
--   each request         slides last_seen_at forward (the idle timeout, DASHBOARD_IDLE_MS)
-- The row holds a SHA-256 of the session id, never the id itself, so a reader of this table (a
-- Grafana role, a SQL client) learns nothing it could present. Expired and idle rows are deleted
-- when someone logs in, so the table holds about one row per live session.
create table worker.dashboard_sessions (
  id_hash bytea primary key check (length(id_hash) = 32),
  created_at timestamptz not null,
  last_seen_at timestamptz not null,
  expires_at timestamptz not null,
  check (expires_at > created_at)
);
