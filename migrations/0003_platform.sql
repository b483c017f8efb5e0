-- Platform state the jobs act on. A service's desired state is what the platform's reconciler
-- converges to: the build job sets its image, provision_db adds an (encrypted) connection
-- string, the cleanup sweep suspends it.
create schema if not exists platform;

create table platform.services (
  id             text primary key,
  account_id     text,
  desired_state  jsonb not null default '{}'::jsonb check (jsonb_typeof(desired_state) = 'object'),
  updated_at     timestamptz not null default now()
);
create index services_account_idx on platform.services (account_id);
