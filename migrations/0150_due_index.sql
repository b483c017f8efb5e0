-- The dispatchers' clock reads when the next queued job falls due (min(run_at)) and how many are
-- due now, once per alarm and once per idle poll (every second on an idle deployment). The
-- claimable index is ordered by (priority, run_at), so both walked every queued row; ordered by
-- run_at alone, the first answer is the first entry and the count stops at its cap.
create index jobs_due_idx on worker.jobs (run_at) where status = 'queued';
