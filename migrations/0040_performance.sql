-- Performance (issue 8): fewer index entries written per job transition.
--
-- Claim and settle are not HOT updates (status appears in index predicates), so every transition
-- writes a new entry into each index whose predicate the new row version matches. Two indexes
-- took an entry for every version of every job while only ever being searched by non-null keys:

-- submit_key: a full unique constraint indexes the NULL of every keyless job, on every update.
-- A partial unique index enforces the same uniqueness for the keys that exist (NULLs never
-- conflicted), and still serves `where submit_key = $1` and enqueue's ON CONFLICT.
alter table worker.jobs drop constraint jobs_submit_key_key;
create unique index jobs_submit_key_uq on worker.jobs (submit_key) where submit_key is not null;

-- Per-key concurrency counts running jobs of one key (`concurrency_key = $1`): jobs without a key
-- need no entry.
drop index worker.jobs_concurrency_idx;
create index jobs_concurrency_idx on worker.jobs (concurrency_key) where status = 'running' and concurrency_key is not null;
