import type { CloudInventory, CloudResource } from '../ports/cloud-inventory.ts';
import type { CloudProvider } from '../../provisioning/ports/cloud-provider.ts';

/**
 * The cleanup sweep's view of the cloud, over the CloudProvider: managed databases and droplets
 * carrying a tag. A resource whose creation time the provider did not give counts as created
 * now, so the sweep's grace period never deletes something of unknown age.
 */
export function cloudInventory(cloud: CloudProvider, now: () => Date = () => new Date()): CloudInventory {
  const created = (at: string | null) => (at && !Number.isNaN(Date.parse(at)) ? new Date(at) : now());
  return {
    async listTagged(tag: string): Promise<CloudResource[]> {
      const [databases, droplets] = await Promise.all([cloud.listDatabasesByTag(tag), cloud.listDropletsByTag(tag)]);
      return [
        ...databases.map((d) => ({ type: 'database', id: d.id, name: d.name, tags: d.tags, createdAt: created(d.createdAt) })),
        ...droplets.map((d) => ({ type: 'droplet', id: String(d.id), name: d.name, tags: d.tags, createdAt: created(d.createdAt) })),
      ];
    },
    async delete(resource) {
      if (resource.type === 'database') return cloud.deleteDatabase(resource.id);
      if (resource.type === 'droplet') return cloud.deleteDroplet(Number(resource.id));
      throw new Error(`the cloud inventory cannot delete a ${resource.type}`);
    },
  };
}
