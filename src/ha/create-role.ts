import type { ClusterRole, RoleDeps } from './cluster-role.js';
import { PrimaryRole } from './primary-role.js';
import { SecondaryRole } from './secondary-role.js';

/** This server's role: the primary datacenter's or a secondary's (README, "Multiple datacenters" and "Several servers per datacenter"). */
export function createClusterRole(deps: RoleDeps): ClusterRole {
  return deps.config.placement.role === 'primary' ? new PrimaryRole(deps) : new SecondaryRole(deps, deps.config.placement.primaryAddresses);
}
