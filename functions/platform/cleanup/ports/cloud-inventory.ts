/** A resource at the cloud provider (a managed database, a droplet). */
export interface CloudResource {
  type: 'database' | 'droplet' | (string & {});
  id: string;
  name: string;
  tags: string[];
  createdAt: Date;
}

/** The slice of the cloud the sweeps need. */
export interface CloudInventory {
  /** Every resource (of every type) carrying the tag. */
  listTagged(tag: string): Promise<CloudResource[]>;
  /** Delete one resource; one that is already gone is not an error. */
  delete(resource: Pick<CloudResource, 'type' | 'id'>): Promise<void>;
}
