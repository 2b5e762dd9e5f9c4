import { tokenHash } from '../../src/domain/hash.js';
import { generateID } from '../../src/domain/ids.js';
import type { TokenRecord } from '../../src/domain/types.js';

/** A well-formed token record for store-level tests. */
export function tokenRecord(overrides: Partial<TokenRecord> = {}): TokenRecord {
  const base = {
    AccessorID: generateID(),
    SecretID: generateID(),
    Description: '',
    Policies: [],
    Roles: [],
    ServiceIdentities: [],
    NodeIdentities: [],
    TemplatedPolicies: [],
    Local: false,
    AuthMethod: '',
    CreateTime: new Date().toISOString(),
    Namespace: 'default',
    Partition: 'default',
    CreateIndex: 0,
    ModifyIndex: 0,
    ...overrides,
  };
  return { ...base, Hash: overrides.Hash ?? tokenHash(base) };
}

/**
 * Token `i` of a varied set, for tests of the compact table's indexes: its own policy link half
 * the time (more distinct values than a load numbers), the rest repeating (roles, services,
 * namespaces, an auth method, locality); a previous secret every 11th, an expiry every other.
 */
export function variedToken(i: number, rnd: () => number): TokenRecord {
  const n = String(i).padStart(12, '0');
  return tokenRecord({
    AccessorID: `00000000-0000-4000-8000-${n}`,
    SecretID: `10000000-0000-4000-8000-${n}`,
    ...(i % 11 === 0 ? { PreviousSecretID: `20000000-0000-4000-8000-${n}` } : {}),
    Policies: rnd() < 0.5 ? [{ ID: `policy-${i}` }] : [{ ID: `shared-${i % 3}` }],
    Roles: rnd() < 0.3 ? [{ ID: `role-${i % 2}` }] : [],
    ServiceIdentities: rnd() < 0.3 ? [{ ServiceName: `svc-${i % 5}` }] : [],
    Namespace: `ns-${i % 4}`,
    AuthMethod: i % 7 === 0 ? 'minikube' : '',
    Local: i % 3 === 0,
    CreateTime: new Date(1_800_000_000_000 + i * 1000).toISOString(),
    ...(i % 2 === 0 ? { ExpirationTime: new Date(1_800_000_000_000 + (i % 500) * 1000).toISOString() } : {}),
  });
}
