import type { WatchwordClient } from '../client/index.js';
import { LookupError, UsageError } from './common.js';

/**
 * IDs given on the command line may be a unique prefix (`-id 6a53`), as in Consul's CLI: a
 * whole UUID is used as it is; a shorter one is looked up among the objects the caller may
 * list, and must match exactly one. The anonymous token and the built-in global-management
 * policy may also be named, as Consul allows.
 */

const UUID_LENGTH = 36;
const ANONYMOUS_TOKEN_ID = '00000000-0000-0000-0000-000000000002';
const GLOBAL_MANAGEMENT_ID = '00000000-0000-0000-0000-000000000001';

type Kind = 'token' | 'policy' | 'role' | 'binding rule' | 'quota';

async function fromPrefix(kind: Kind, prefix: string, ids: () => Promise<string[]>): Promise<string> {
  if (prefix === '') throw new UsageError(`missing required flag -id`);
  if (prefix.length >= UUID_LENGTH) return prefix;
  const lower = prefix.toLowerCase();
  const found = (await ids()).filter((id) => id.toLowerCase().startsWith(lower));
  if (found.length === 0) throw new LookupError(`Error determining ${kind} ID: No such ${kind} ID with prefix: ${prefix}`);
  if (found.length > 1)
    throw new LookupError(
      `Error determining ${kind} ID: Partial ${kind} ID is not unique (${prefix} matches ${found.length}: ` +
        `${found.slice(0, 5).join(', ')}${found.length > 5 ? ', …' : ''})`,
    );
  return found[0] as string;
}

export function tokenID(c: WatchwordClient, id: string): Promise<string> {
  if (id === 'anonymous') return Promise.resolve(ANONYMOUS_TOKEN_ID);
  return fromPrefix('token', id, async () => (await c.tokens.list()).value.map((t) => t.AccessorID));
}

export function policyID(c: WatchwordClient, id: string): Promise<string> {
  if (id === 'global-management') return Promise.resolve(GLOBAL_MANAGEMENT_ID);
  return fromPrefix('policy', id, async () => (await c.policies.list()).value.map((p) => p.ID));
}

export function roleID(c: WatchwordClient, id: string): Promise<string> {
  return fromPrefix('role', id, async () => (await c.roles.list()).value.map((r) => r.ID));
}

export function bindingRuleID(c: WatchwordClient, id: string): Promise<string> {
  return fromPrefix('binding rule', id, async () => (await c.bindingRules.list()).value.map((r) => r.ID));
}

/** A quota's ID from a unique prefix of it, or from its name (quotas are few, and named). */
export async function quotaID(c: WatchwordClient, id: string): Promise<string> {
  if (id.length >= UUID_LENGTH) return id;
  const quotas = (await c.quotas.list()).value;
  const byName = quotas.find((q) => q.Name.toLowerCase() === id.toLowerCase());
  if (byName) return byName.ID;
  return fromPrefix('quota', id, async () => quotas.map((q) => q.ID));
}
