-- Flow control (issue 19): rate limits per key, fair queueing across keys, and pausing a job
-- type or a pool.
--
-- Rate limits. A job type declares `rateLimit: { key, limit, per }`; each of its jobs carries the
-- key (worker.jobs.rate_key, set by the enqueue from the type) and no claim starts more than
-- `max_starts` steps of one key in any window of `per_ms`. The key's row holds the recent step
-- starts (a sliding log: one timestamp per start), so the room a claim has is the limit less
-- the starts after `now - per`: exact, where a token bucket lets twice the limit through in a
-- window that spans a refill. A claim takes a key's row with FOR UPDATE SKIP LOCKED, counts,
-- admits at most the room and appends its starts before it commits: concurrent claimers can
-- never both spend the same room, and since no claim ever waits for a key's row, the rows add
-- no wait to the claim's lock order (concurrency keys, then nothing). A step that throws a
-- rate-limit error (a provider's 429) pauses the whole key until `paused_until`
-- (worker.settle_rate_limited); claims skip the key's jobs meanwhile, without touching them.
create table worker.rate_limits (
  key          text primary key check (char_length(key) between 1 and 200 and key !~ '[{}]'),
  max_starts   integer not null check (max_starts between 1 and 100000),
  per_ms       bigint not null check (per_ms between 1000 and 604800000),   -- 1 s to 7 days
  starts       timestamptz[] not null default '{}',
  paused_until timestamptz,
  pause_reason text,
  updated_at   timestamptz not null default now()
);

-- Fair queueing. A job type declares `fairness: { key: 'account:{accountId}' }` (a template over
-- the payload, as a concurrency key); a claim that finds due jobs with a fairness key takes them
-- round-robin across keys, each key's jobs in (priority, run_at) order, the jobs without a key
-- being one more lane. A key's weight (worker.fair_weights, default 1) is how many turns it
-- gets per round.
create table worker.fair_weights (
  key    text primary key check (char_length(key) between 1 and 200),
  weight integer not null check (weight between 1 and 100)
);

alter table worker.job_types
  add column rate_key text references worker.rate_limits (key),
  add column fair_key text check (fair_key ~ '^[^{}]+(\{[A-Za-z_][A-Za-z0-9_]*\}[^{}]*)*$' and char_length(fair_key) <= 200);

alter table worker.jobs
  add column rate_key text,
  add column fair_key text;

-- The fair claim's lanes: the distinct keys with queued jobs (a skip scan), and each key's first
-- jobs in claim order. Only rows with a key are in it: it costs the common path nothing.
create index jobs_fair_idx on worker.jobs (fair_key, priority, run_at)
  where status = 'queued' and fair_key is not null;

-- Pause and resume. A paused type is claimed by no runner, a paused pool's runners claim
-- nothing; queued jobs stay as they are, running ones finish. Who paused it, when and why is
-- the row; resuming deletes it.
create table worker.pauses (
  kind      text not null check (kind in ('type', 'pool')),
  name      text not null check (char_length(name) between 1 and 200),
  paused_by text not null check (char_length(paused_by) between 1 and 200),
  paused_at timestamptz not null default now(),
  reason    text not null check (char_length(reason) between 1 and 500),
  primary key (kind, name)
);
