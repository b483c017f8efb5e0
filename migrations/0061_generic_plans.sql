-- The claim and the batch completion run once per runner round trip with fresh parameters. Under
-- the default plan_cache_mode, PL/pgSQL keeps building custom plans for their statements (array
-- parameters make the generic plan look no cheaper), so every batch paid for planning again:
-- about 3% of a job's server CPU (callgrind, 10,000 jobs in batches of 128). Their plans do not
-- depend on the values: the claim walks the queued-rows partial index and the completion looks
-- rows up by primary key either way.
alter function worker.claim_jobs(text, text, int, timestamptz) set plan_cache_mode = force_generic_plan;
alter function worker.complete_jobs(jsonb, timestamptz) set plan_cache_mode = force_generic_plan;
