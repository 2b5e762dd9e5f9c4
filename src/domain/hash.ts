import { hash } from 'node:crypto';
import { POLICY_FIELDS, ROLE_FIELDS, TOKEN_FIELDS, hashInput } from './records.js';
import type { PolicyRecord, RoleRecord, TokenRecord } from './types.js';

/**
 * Content hashes: base64 SHA-256 over the fields that describe what an object grants (those
 * domain/records.ts marks `hash`), never IDs, secrets, times or indexes, so the same object
 * hashes the same in every datacenter. Each field is written with a tag and a length so no
 * two different contents can produce the same byte stream.
 */
const tokenText = hashInput(TOKEN_FIELDS);
const roleText = hashInput(ROLE_FIELDS);
const policyText = hashInput(POLICY_FIELDS);

// The one-shot form: no Hash object per digest.
const digest = (text: string): string => hash('sha256', text, 'base64');

export function tokenHash(
  t: Pick<TokenRecord, 'Description' | 'Local' | 'Roles' | 'Policies' | 'ServiceIdentities' | 'NodeIdentities' | 'TemplatedPolicies'>,
): string {
  return digest(tokenText(t));
}

export function roleHash(
  r: Pick<RoleRecord, 'Name' | 'Description' | 'Policies' | 'ServiceIdentities' | 'NodeIdentities' | 'TemplatedPolicies'>,
): string {
  return digest(roleText(r));
}

export function policyHash(p: Pick<PolicyRecord, 'Name' | 'Description' | 'Rules' | 'Datacenters'>): string {
  return digest(policyText(p));
}

/** A stable short ID for rendered (synthetic) policies: the same rules give the same ID. */
export function syntheticPolicyID(rules: string): string {
  const hex = hash('sha256', rules, 'hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
