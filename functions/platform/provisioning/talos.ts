/**
 * Talos machine configs for cluster nodes.
 *
 * The operator generates the configs once (`talosctl gen config <cluster-name> https://<endpoint>:6443`
 * gives controlplane.yaml, worker.yaml and talosconfig) and stores controlplane.yaml and worker.yaml
 * sealed in `platform.sealed_secrets` (`storeTalosMachineConfigs`). They hold the cluster's CA keys
 * and join tokens, and at tens of KiB they exceed a Worker secret's 5 KB limit, so the database holds
 * them encrypted and the Worker holds only the key (ENCRYPTION_KEYS). The talosconfig (the client
 * credential) stays with the operator: it is what `talosctl bootstrap --talosconfig` reads.
 *
 * A node's user-data is its role's config with a header naming the cluster and node. DigitalOcean
 * passes user-data to Talos on first boot; the droplet's name reaches Talos as its hostname through
 * the platform metadata, so the config itself needs no per-node edits.
 */
import { z } from 'zod';
import { PermanentError } from '../../../queue/errors.ts';
import type { Queryable } from '../../../queue/db.ts';
import { decryptSecret, encryptSecret, SecretError, type KeyRing } from '../../lib/secrets.ts';
import { parseRow } from '../rows.ts';
import type { NodeRole, PlannedNode } from './resources.ts';

export interface TalosMachineConfigs {
  controlplane: string;
  worker: string;
}

export const TALOS_CONFIGS_SECRET = 'talos_machine_configs';
const TALOS_CONFIGS_CONTEXT = 'starbase:sealed_secrets:talos_machine_configs';
/** DigitalOcean's cap on user_data. */
const MAX_USER_DATA_BYTES = 64 * 1024;

/** The `machine.type` a config declares (`init` is the legacy first control plane); null if none. */
function machineType(yaml: string): string | null {
  const lines = yaml.split(/\r?\n/);
  const start = lines.findIndex((l) => /^machine:\s*(#.*)?$/.test(l));
  if (start < 0) return null;
  let childIndent: number | null = null;
  for (const line of lines.slice(start + 1)) {
    if (!line.trim() || /^\s*#/.test(line)) continue;
    const indent = line.length - line.trimStart().length;
    if (indent === 0) break; // the next top-level key: the machine section ended
    childIndent ??= indent;
    if (indent !== childIndent) continue;
    const match = /^\s+type:\s*["']?([a-z]+)["']?\s*(#.*)?$/.exec(line);
    if (match?.[1]) return match[1];
  }
  return null;
}

/** Checks each config is a Talos machine config of the right role; the message never quotes the config. */
export function validateTalosMachineConfigs(configs: TalosMachineConfigs): void {
  const expect: Record<NodeRole, string[]> = { controlplane: ['controlplane', 'init'], worker: ['worker'] };
  for (const role of ['controlplane', 'worker'] as const) {
    const yaml = configs[role];
    if (typeof yaml !== 'string' || !yaml.trim()) throw new Error(`the ${role} machine config is empty`);
    const type = machineType(yaml);
    if (!type) throw new Error(`the ${role} machine config has no machine.type: is it a talosctl gen config output?`);
    if (!expect[role].includes(type)) throw new Error(`the ${role} machine config declares machine.type ${type}`);
  }
}

export function renderNodeUserData(configs: TalosMachineConfigs, node: PlannedNode, clusterId: string): string {
  const header = `# starbase cluster ${clusterId}: node ${node.name} (${node.role})\n`;
  const userData = header + configs[node.role];
  if (new TextEncoder().encode(userData).length > MAX_USER_DATA_BYTES) {
    throw new PermanentError(`the ${node.role} machine config is larger than DigitalOcean's 64 KiB user_data limit`);
  }
  return userData;
}

/** What the operator runs once the nodes are up: etcd is bootstrapped on the first control plane. */
export function talosBootstrapCommand(ip: string): string {
  return `talosctl bootstrap --nodes ${ip} --endpoints ${ip} --talosconfig ./talosconfig`;
}

/** Seal and store the operator's configs (replacing earlier ones). */
export async function storeTalosMachineConfigs(sql: Queryable, configs: TalosMachineConfigs, ring: KeyRing): Promise<{ kid: string }> {
  validateTalosMachineConfigs(configs);
  const sealed = await encryptSecret(JSON.stringify({ controlplane: configs.controlplane, worker: configs.worker }), ring, { context: TALOS_CONFIGS_CONTEXT });
  await sql`
    insert into platform.sealed_secrets (name, kid, iv, ct)
    values (${TALOS_CONFIGS_SECRET}, ${sealed.kid}, ${sealed.iv}, ${sealed.ct})
    on conflict (name) do update set kid = excluded.kid, iv = excluded.iv, ct = excluded.ct, updated_at = now()`;
  return { kid: sealed.kid };
}

/** A platform.sealed_secrets row: what decryptSecret opens. */
const sealedRow = z.object({ kid: z.string(), iv: z.string(), ct: z.string() });
/** What storeTalosMachineConfigs seals; validateTalosMachineConfigs checks the YAML in them. */
const sealedConfigs = z.object({ controlplane: z.string(), worker: z.string() });

/** The stored configs, decrypted. A missing or unreadable secret fails the job: retrying cannot fix it. */
export async function loadTalosMachineConfigs(sql: Queryable, ring: KeyRing): Promise<TalosMachineConfigs> {
  const [found] = await sql`select kid, iv, ct from platform.sealed_secrets where name = ${TALOS_CONFIGS_SECRET}`;
  if (!found) throw new PermanentError('no Talos machine configs are stored: run talosctl gen config and store them (see the README)');
  const sealed = parseRow('platform.sealed_secrets', sealedRow, found);
  let plain: string;
  try {
    plain = await decryptSecret(sealed, ring, { context: TALOS_CONFIGS_CONTEXT });
  } catch (error) {
    throw new PermanentError(`the stored Talos machine configs do not decrypt: ${(error as SecretError).message}`);
  }
  const configs: TalosMachineConfigs = parseRow(`platform.sealed_secrets ${TALOS_CONFIGS_SECRET} (decrypted)`, sealedConfigs, JSON.parse(plain));
  validateTalosMachineConfigs(configs);
  return configs;
}
