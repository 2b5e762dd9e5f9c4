import type { ClusterRole, RoleDeps } from './cluster-role.js';
import { DatacenterRole } from './datacenter-role.js';

/** This server's role: its datacenter's servers, and the side (primary or secondary) its placement names. */
export function createClusterRole(deps: RoleDeps): ClusterRole {
  return new DatacenterRole(deps, deps.placement);
}
