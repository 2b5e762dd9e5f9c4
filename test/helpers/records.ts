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
