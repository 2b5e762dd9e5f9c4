import { invalid } from './errors.js';
import { findTemplate } from './templates.js';
import type { NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from './types.js';

/**
 * Validation and normalisation of what tokens and roles grant: identities, templated
 * policies and links. Shared by both, since the rules are the same; `owner` names the
 * object kind in messages ("token" or "role"), as Consul's messages do.
 */

const IDENTITY_NAME_RE = /^[a-z0-9]([a-z0-9\-_]*[a-z0-9])?$/;
const IDENTITY_NAME_MAX = 256;
const DATACENTER_RE = /^[a-z0-9]([a-z0-9\-_]*[a-z0-9])?$/;

export const isValidIdentityName = (name: string): boolean =>
  name.length >= 1 && name.length <= IDENTITY_NAME_MAX && IDENTITY_NAME_RE.test(name);

export const isValidDatacenterName = (name: string): boolean => name.length <= 256 && DATACENTER_RE.test(name);

export type Owner = 'token' | 'role';

export function checkDatacenterNames(dcs: readonly string[], what: string): void {
  for (const dc of dcs) {
    if (!isValidDatacenterName(dc)) {
      throw invalid(
        `${what} has an invalid datacenter name ${JSON.stringify(dc)}. Only lowercase alphanumeric characters, '-' and '_' are allowed`,
      );
    }
  }
}

/** Validates service identities and merges duplicates (datacenters unioned and sorted, order of first kept). */
/** Identities as clients send them: fields may be missing, which validation reports. */
export interface ServiceIdentityInput {
  ServiceName?: string;
  Datacenters?: string[];
}

export interface NodeIdentityInput {
  NodeName?: string;
  Datacenter?: string;
}

export function normalizeServiceIdentities(list: readonly ServiceIdentityInput[], owner: Owner, local: boolean): ServiceIdentity[] {
  const merged = new Map<string, Set<string> | null>();
  for (const s of list) {
    if (!s.ServiceName) throw invalid(`Service identity is missing the service name field on this ${owner}`);
    if (!isValidIdentityName(s.ServiceName)) {
      throw invalid(
        `Service identity ${JSON.stringify(s.ServiceName)} has an invalid name. Only lowercase alphanumeric characters, '-' and '_' ` +
          `are allowed`,
      );
    }
    const dcs = s.Datacenters ?? [];
    if (local && dcs.length > 0) {
      throw invalid(`Service identity ${JSON.stringify(s.ServiceName)} cannot specify a list of datacenters on a local token`);
    }
    checkDatacenterNames(dcs, `Service identity ${JSON.stringify(s.ServiceName)}`);
    const prev = merged.get(s.ServiceName);
    if (prev === undefined) {
      merged.set(s.ServiceName, dcs.length > 0 ? new Set(dcs) : null);
    } else if (prev === null || dcs.length === 0) {
      // An identity valid in all datacenters absorbs any narrower duplicate.
      merged.set(s.ServiceName, null);
    } else {
      for (const dc of dcs) prev.add(dc);
    }
  }
  return [...merged].map(([ServiceName, dcs]) => (dcs ? { ServiceName, Datacenters: [...dcs].sort() } : { ServiceName }));
}

/** Validates node identities and collapses duplicates on (NodeName, Datacenter). */
export function normalizeNodeIdentities(list: readonly NodeIdentityInput[], owner: Owner): NodeIdentity[] {
  const seen = new Set<string>();
  const out: NodeIdentity[] = [];
  for (const n of list) {
    if (!n.NodeName) throw invalid(`Node identity is missing the node name field on this ${owner}`);
    if (!n.Datacenter) throw invalid(`Node identity is missing the datacenter field on this ${owner}`);
    if (!isValidIdentityName(n.NodeName)) {
      throw invalid(
        `Node identity ${JSON.stringify(n.NodeName)} has an invalid name. Only lowercase alphanumeric characters, '-' and '_' are allowed`,
      );
    }
    checkDatacenterNames([n.Datacenter], `Node identity ${JSON.stringify(n.NodeName)}`);
    const key = `${n.NodeName}\u0000${n.Datacenter}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ NodeName: n.NodeName, Datacenter: n.Datacenter });
  }
  return out;
}

/** Raw templated-policy input: the variable's key may arrive in any letter case (`Name`, `name`, `NAME`). */
export interface TemplatedPolicyInput {
  TemplateName?: string;
  TemplateVariables?: Record<string, unknown>;
  Datacenters?: string[];
}

/** Validates templated policies against their templates and collapses duplicates on (TemplateName, variables). */
export function normalizeTemplatedPolicies(list: readonly TemplatedPolicyInput[], owner: Owner, local: boolean): TemplatedPolicyLink[] {
  const seen = new Set<string>();
  const out: TemplatedPolicyLink[] = [];
  for (const t of list) {
    if (!t.TemplateName) throw invalid(`Templated policy is missing the template name field on this ${owner}`);
    const template = findTemplate(t.TemplateName);
    if (!template) throw invalid(`No such ACL templated policy with name ${JSON.stringify(t.TemplateName)}`);
    const vars = t.TemplateVariables ?? {};
    let name: string | undefined;
    for (const [key, value] of Object.entries(vars)) {
      // Any letter case, as Consul's decoder matches field names.
      if (key.toLowerCase() !== 'name') {
        throw invalid(`Invalid templated policy ${JSON.stringify(t.TemplateName)}: unknown variable ${JSON.stringify(key)}`);
      }
      if (typeof value !== 'string') {
        throw invalid(`Invalid templated policy ${JSON.stringify(t.TemplateName)}: variable ${JSON.stringify(key)} must be a string`);
      }
      if (name !== undefined && name !== value) {
        throw invalid(`Invalid templated policy ${JSON.stringify(t.TemplateName)}: variable "Name" given twice`);
      }
      name = value;
    }
    if (template.needsName) {
      if (name === undefined || name === '') {
        throw invalid(`Invalid templated policy ${JSON.stringify(t.TemplateName)}: variable "Name" is required`);
      }
      if (!isValidIdentityName(name)) {
        throw invalid(
          `Invalid templated policy ${JSON.stringify(t.TemplateName)}: name ${JSON.stringify(name)} is invalid. Only lowercase ` +
            `alphanumeric characters, '-' and '_' are allowed`,
        );
      }
    } else if (name !== undefined && name !== '') {
      throw invalid(`Invalid templated policy ${JSON.stringify(t.TemplateName)}: this template takes no variables`);
    }
    const dcs = t.Datacenters ?? [];
    if (local && dcs.length > 0) {
      throw invalid(`Templated policy ${JSON.stringify(t.TemplateName)} cannot specify a list of datacenters on a local token`);
    }
    checkDatacenterNames(dcs, `Templated policy ${JSON.stringify(t.TemplateName)}`);
    const key = `${t.TemplateName}\u0000${name ?? ''}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({
      TemplateName: t.TemplateName,
      ...(template.needsName ? { TemplateVariables: { name: name as string } } : {}),
      ...(dcs.length > 0 ? { Datacenters: [...new Set(dcs)].sort() } : {}),
    });
  }
  return out;
}
