import { policyHash, roleHash } from '../domain/hash.js';
import { AUTH_METHOD_FIELDS, BINDING_RULE_FIELDS, POLICY_FIELDS, QUOTA_FIELDS, ROLE_FIELDS, TOKEN_FIELDS } from '../domain/records.js';
import { recordCheck } from '../domain/record-check.js';
import type { AuthMethodRecord, BindingRuleRecord, PolicyRecord, QuotaRecord, RoleRecord, TokenRecord } from '../domain/types.js';
import type { TableName } from './schema.js';

/**
 * Checks of records read back from disk, received from a leader, or staged, in place: the
 * fast checks domain/records.ts derives from each record's declaration (the strict schemas
 * in records.ts agree with them on every record; a test holds both to it). At a million
 * records, a schema's copy of each would double the allocation and the start-up time.
 */

export const isTokenRecord: (v: unknown) => v is TokenRecord = recordCheck(TOKEN_FIELDS);
const policyShape = recordCheck(POLICY_FIELDS);
const roleShape = recordCheck(ROLE_FIELDS);
export const isAuthMethodRecord: (v: unknown) => v is AuthMethodRecord = recordCheck(AUTH_METHOD_FIELDS);
export const isBindingRuleRecord: (v: unknown) => v is BindingRuleRecord = recordCheck(BINDING_RULE_FIELDS);
export const isQuotaRecord: (v: unknown) => v is QuotaRecord = recordCheck(QUOTA_FIELDS);

/**
 * A policy's and a role's Hash are recomputed from the record as it is read (never taken on
 * trust: docs/security.md, "Security"); there are few of them. A token's is computed where it is shown
 * (service/views.ts): at a million tokens, recomputing at load would cost seconds of start-up.
 */
export function isPolicyRecord(v: unknown): v is PolicyRecord {
  if (!policyShape(v)) return false;
  v.Hash = policyHash(v);
  return true;
}

export function isRoleRecord(v: unknown): v is RoleRecord {
  if (!roleShape(v)) return false;
  v.Hash = roleHash(v);
  return true;
}

/** Namespaces and partitions repeat across records: one copy of each (at most 10,000 kept). */
const interned = new Map<string, string>();
const shared = (s: string): string => {
  let v = interned.get(s);
  if (v === undefined) {
    if (interned.size < 10_000) interned.set(s, s);
    v = s;
  }
  return v;
};

/** What records repeat, shared: their place's names (a checked record's empty lists are already one frozen array). */
export function shareRecordParts(record: Record<string, unknown>): void {
  if (typeof record.Namespace === 'string') record.Namespace = shared(record.Namespace);
  if (typeof record.Partition === 'string') record.Partition = shared(record.Partition);
}

/** Each table's record check. */
export const RECORD_CHECKS: { [T in TableName]: (v: unknown) => boolean } = {
  tokens: isTokenRecord,
  policies: isPolicyRecord,
  roles: isRoleRecord,
  authMethods: isAuthMethodRecord,
  bindingRules: isBindingRuleRecord,
  quotas: isQuotaRecord,
};
