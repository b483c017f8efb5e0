-- The `build` job type (functions/jobs/build.ts), registered here so that pushes can be enqueued
-- from plain SQL (worker.enqueue_job) before any runner has synced its registry. Lease and
-- attempts match BUILD_LEASE_MS / BUILD_MAX_ATTEMPTS: a poll step is short, and eight attempts
-- with 2 s → 60 s backoff ride out a few minutes of build-service outage.
insert into worker.job_types (type, lease_ms, max_attempts, weight) values ('build', 120000, 8, 'light')
on conflict (type) do nothing;
