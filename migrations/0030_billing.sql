-- Month-end billing (accounts, plans, the database size ledger, usage, invoices) and the state
-- the cleanup sweeps act on. Periods are calendar months in UTC, written 'YYYY-MM'.

create domain platform.billing_period as text check (value ~ '^[0-9]{4}-(0[1-9]|1[0-2])$');

-- The period (UTC calendar month) a moment falls in.
create function platform.period_of(p_at timestamptz) returns platform.billing_period
language sql stable as $$ select to_char(p_at at time zone 'UTC', 'YYYY-MM')::platform.billing_period $$;

-- The period after p.
create function platform.next_period(p platform.billing_period) returns platform.billing_period
language sql stable as $$
  select to_char(to_date(p, 'YYYY-MM') + interval '1 month', 'YYYY-MM')::platform.billing_period
$$;

create table platform.plans (
  id                     text primary key,
  name                   text not null,
  monthly_price_cents    bigint not null check (monthly_price_cents >= 0),
  -- Usage up to this amount each period is covered by the plan (never below zero usage).
  included_credit_cents  bigint not null default 0 check (included_credit_cents >= 0),
  currency               text not null default 'usd' check (currency ~ '^[a-z]{3}$')
);

create table platform.accounts (
  id                  text primary key check (length(id) between 1 and 64),
  name                text,
  -- The plan (this cycle's and the next's) lives in platform.account_plans: see there and
  -- the view platform.account_plan_now.
  stripe_customer_id  text unique,
  status              text not null default 'active'
                      check (status in ('active', 'payment_failed', 'suspended', 'cancelled')),
  payment_failed_at   timestamptz,
  suspended_at        timestamptz,
  cancelled_at        timestamptz,
  -- Set by the cleanup sweep once the cancelled account's data is gone; the row and its
  -- invoices stay as the financial record.
  data_purged_at      timestamptz,
  created_at          timestamptz not null default now(),
  check (status <> 'payment_failed' or payment_failed_at is not null),
  check (status <> 'cancelled' or cancelled_at is not null)
);
create index accounts_payment_failed_idx on platform.accounts (payment_failed_at) where status = 'payment_failed';
create index accounts_cancelled_idx on platform.accounts (cancelled_at) where status = 'cancelled' and data_purged_at is null;

-- Which plan is billed for which period. The plan billed for period P is the row with the
-- latest from_period <= P. A change made during P takes effect from P+1 (no proration), so a
-- change that lands before P-1 has been invoiced can never alter P-1's plan: two columns on
-- the account could not keep that apart once a second change arrives in the same window.
create table platform.account_plans (
  account_id   text not null references platform.accounts (id),
  from_period  platform.billing_period not null,
  plan         text not null references platform.plans (id),
  changed_at   timestamptz not null default now(),
  primary key (account_id, from_period)
);

-- Sign-up: the account and its first plan, in force from the sign-up month.
create function platform.create_account(p_id text, p_plan text, p_stripe_customer_id text default null,
  p_at timestamptz default null, p_name text default null) returns platform.accounts
language plpgsql as $$
declare
  v_at  timestamptz := coalesce(p_at, now());
  v_row platform.accounts;
begin
  insert into platform.accounts (id, name, stripe_customer_id, created_at)
  values (p_id, p_name, p_stripe_customer_id, v_at) returning * into v_row;
  insert into platform.account_plans (account_id, from_period, plan, changed_at)
  values (p_id, platform.period_of(v_at), p_plan, v_at);
  return v_row;
end $$;

-- A plan change requested at p_at takes effect at the next cycle. Choosing the plan already in
-- force cancels a pending change. Returns the plan that will be in force next cycle.
create function platform.change_plan(p_account text, p_plan text, p_at timestamptz default null)
returns text language plpgsql as $$
declare
  v_at      timestamptz := coalesce(p_at, now());
  v_next    platform.billing_period := platform.next_period(platform.period_of(v_at));
  v_current text;
begin
  select a.plan into v_current from platform.account_plans a
   where a.account_id = p_account and a.from_period < v_next
   order by a.from_period desc limit 1;
  if v_current is null then
    raise exception 'account % does not exist', p_account using errcode = 'SB400', column = 'accountId';
  end if;
  if p_plan = v_current then
    delete from platform.account_plans a where a.account_id = p_account and a.from_period >= v_next;
  else
    insert into platform.account_plans (account_id, from_period, plan, changed_at)
    values (p_account, v_next, p_plan, v_at)
    on conflict (account_id, from_period) do update set plan = excluded.plan, changed_at = excluded.changed_at;
  end if;
  return p_plan;
end $$;

-- Each account's plan for the current cycle and, when a change is pending, for the next one.
create view platform.account_plan_now as
  select acc.id as account_id,
         (select a.plan from platform.account_plans a
           where a.account_id = acc.id and a.from_period <= platform.period_of(now())
           order by a.from_period desc limit 1) as plan,
         (select a.plan from platform.account_plans a
           where a.account_id = acc.id and a.from_period = platform.next_period(platform.period_of(now()))) as next_cycle_plan
    from platform.accounts acc;

-- The dedicated-database size ledger: each snapshot's rate applies from effective_from until
-- the database's next snapshot. A deleted database gets a snapshot at rate 0.
create table platform.database_size_snapshots (
  id              bigint generated always as identity primary key,
  database_id     text not null,
  account_id      text not null references platform.accounts (id),
  cents_per_hour  numeric(14, 6) not null check (cents_per_hour >= 0),
  effective_from  timestamptz not null,
  unique (database_id, effective_from)
);
create index database_size_snapshots_account_idx on platform.database_size_snapshots (account_id, effective_from);

-- Metered usage, already priced by whoever meters it (one row per account, period and metric).
create table platform.usage_totals (
  account_id  text not null references platform.accounts (id),
  period      platform.billing_period not null,
  metric      text not null check (metric ~ '^[a-z][a-z0-9_]{0,62}$'),
  quantity    numeric not null default 0 check (quantity >= 0),
  cents       bigint not null check (cents >= 0),
  updated_at  timestamptz not null default now(),
  primary key (account_id, period, metric)
);

-- One invoice per account and period. `lines` are frozen when first computed, so every retry
-- sends Stripe the same parameters under the same idempotency keys.
--   draft      computed; the Stripe invoice may be partly built (stripe_invoice_id once created)
--   open       finalized at Stripe, awaiting payment
--   paid / uncollectible / void   as reported by Stripe
--   no_charge  nothing to bill (every line zero): no Stripe invoice is created
create table platform.invoices (
  id                 bigint generated always as identity primary key,
  account_id         text not null references platform.accounts (id),
  period             platform.billing_period not null,
  plan               text not null references platform.plans (id),
  stripe_customer_id text,
  stripe_invoice_id  text unique,
  lines              jsonb not null check (jsonb_typeof(lines) = 'array'),
  total_cents        bigint not null check (total_cents >= 0),
  currency           text not null,
  status             text not null default 'draft'
                     check (status in ('draft', 'open', 'paid', 'uncollectible', 'void', 'no_charge')),
  job_id             uuid,
  payment_failed_at  timestamptz,
  created_at         timestamptz not null default now(),
  finalized_at       timestamptz,
  paid_at            timestamptz,
  unique (account_id, period)
);
create index invoices_period_idx on platform.invoices (period, status);

-- One summary per billed period, written by billing_cron once every invoice job has settled.
create table platform.billing_runs (
  period          platform.billing_period primary key,
  job_id          uuid not null,
  accounts        int not null,
  invoiced        int not null,   -- finalized at Stripe
  no_charge       int not null,
  failed          int not null,   -- invoice jobs that ended failed or cancelled
  total_cents     bigint not null,
  failures        jsonb not null default '[]'::jsonb,
  started_at      timestamptz not null,
  finished_at     timestamptz not null
);

-- Stripe webhook events already applied: Stripe delivers at least once.
create table platform.stripe_events (
  id           text primary key,
  type         text not null,
  account_id   text,
  created      timestamptz not null,
  received_at  timestamptz not null default now()
);
create index stripe_events_received_idx on platform.stripe_events (received_at);

-- Every destructive action of the cleanup sweeps, with the job that took it (the audit trail
-- an operator reads after the fact; the job's result carries the same actions in summary).
create table platform.cleanup_actions (
  id       bigint generated always as identity primary key,
  job_id   uuid not null,
  sweep    text not null,
  action   text not null,
  target   text not null,
  detail   jsonb not null default '{}'::jsonb,
  at       timestamptz not null default now()
);
create index cleanup_actions_job_idx on platform.cleanup_actions (job_id, id);
create index cleanup_actions_target_idx on platform.cleanup_actions (target);

-- Job types (a runner's registry sync keeps these rows in step with its code). billing_cron's
-- first step enqueues one job per account in a single batch, hence the longer lease.
insert into worker.job_types (type, lease_ms, max_attempts) values
  ('billing_cron', 600000, 5), ('invoice_account', 120000, 5), ('cleanup', 300000, 3)
on conflict (type) do nothing;
