-- Provisioning: managed Postgres databases and Talos clusters (provision_db, provision_cluster).
-- A row exists for everything a provisioning job created at the cloud provider, from the step that
-- created it on; `provider_tag` is the tag on the provider's resources, which is how compensation
-- and the cleanup sweep find them. Connection strings live only encrypted, in the service's
-- desired state (platform.services.desired_state.databases.<name> = {kid, iv, ct, poolName, …}).

create table platform.databases (
  id           uuid primary key default gen_random_uuid(),
  job_id       uuid not null unique,          -- the provision_db job that owns it
  account_id   text not null,
  service_id   text not null,
  name         text not null,                 -- the key in the service's desired_state.databases
  engine       text not null default 'pg',
  region       text not null,
  size         text not null,
  provider     text not null default 'digitalocean',
  provider_id  text,                          -- the provider's cluster id
  provider_tag text not null,
  pool_name    text,
  status       text not null default 'provisioning'
               check (status in ('provisioning', 'online', 'destroyed')),
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  online_at    timestamptz,
  destroyed_at timestamptz
);
-- One live database per (service, name): a second provisioning of the same name fails clearly.
create unique index databases_live_name_uq on platform.databases (service_id, name)
  where status in ('provisioning', 'online');
create index databases_account_idx on platform.databases (account_id);

create table platform.clusters (
  id                 uuid primary key,          -- = the provision_cluster job's id
  account_id         text not null,
  name               text not null,
  region             text not null,
  size               text not null,
  control_planes     int  not null check (control_planes >= 1),
  workers            int  not null check (workers >= 0),
  provider           text not null default 'digitalocean',
  provider_tag       text not null,
  status             text not null default 'provisioning'
                     check (status in ('provisioning', 'awaiting_bootstrap', 'active', 'destroyed')),
  -- [{name, role, dropletId, publicIpv4, privateIpv4}]
  nodes              jsonb not null default '[]'::jsonb check (jsonb_typeof(nodes) = 'array'),
  endpoint           text,                      -- the control-plane address the API is probed at
  bootstrap_command  text,
  kubernetes_version text,
  -- [{name, role, installedBy}]: what the cluster installs itself from its machine config
  addons             jsonb not null default '[]'::jsonb check (jsonb_typeof(addons) = 'array'),
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now(),
  active_at          timestamptz,
  destroyed_at       timestamptz
);
create unique index clusters_live_name_uq on platform.clusters (account_id, name) where status <> 'destroyed';

-- Operator secrets too large for a Worker secret (5 KB), sealed with the Worker's ENCRYPTION_KEYS
-- (AES-256-GCM, {kid, iv, ct}): e.g. the Talos machine configs from `talosctl gen config`.
create table platform.sealed_secrets (
  name       text primary key,
  kid        text not null,
  iv         text not null,
  ct         text not null,
  updated_at timestamptz not null default now()
);

-- Provider calls are slow and a cluster step creates many droplets: a longer lease than the default.
insert into worker.job_types (type, lease_ms, max_attempts, weight) values
  ('provision_db', 300000, 5, 'light'),
  ('provision_cluster', 300000, 5, 'light')
on conflict (type) do nothing;
