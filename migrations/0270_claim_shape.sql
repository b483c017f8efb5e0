-- The claim chooses its statement by shape (worker.claim_jobs): the plain path
-- (worker.claim_plain) while nothing the limited walk exists for is in play. Whether any queued
-- job has a concurrency key is one probe of this index, which holds only such jobs: plain jobs
-- never enter it, and a keyed job leaves it when claimed.
create index jobs_keyed_queued_idx on worker.jobs (concurrency_key)
  where status = 'queued' and concurrency_key is not null;
