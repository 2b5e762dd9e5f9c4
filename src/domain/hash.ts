// Content hashes: base64 SHA-256 over the fields that describe what an object grants (those
// domain/records.ts marks `hash`), never IDs, secrets, times or indexes, so the same object
// hashes the same in every datacenter. Each field is written with a tag and a length so no
// two different contents can produce the same byte stream.
import { hash } from 'node:crypto';
import {
  type FieldKind,
  type FieldTable,
  type Link,
  type NodeIdentity,
  POLICY_FIELDS,
  ROLE_FIELDS,
  type RecordOf,
  type ServiceIdentity,
  TOKEN_FIELDS,
  type TemplatedPolicyLink,
} from './records.js';
import type { PolicyRecord, RoleRecord, TokenRecord } from './types.js';

/** One value in the hash's text: its tag, its length in bytes, itself. */
const hashField = (tag: string, v: string): string => `${tag}:${Buffer.byteLength(v)}:${v};`;

/**
 * A field's part of the hash's text, by kind (each kind written as it always was: the Hash is
 * kept across versions): a list is its tag and length, then each item as a value. Written
 * straight into one string (no array or closure per call): every write hashes its record.
 */
function hashText(kind: FieldKind, value: unknown, tag: string): string {
  switch (kind) {
    case 'boolean':
      // A token's locality is the one boolean hashed.
      return hashField(tag, value ? 'local' : 'global');
    case 'links': {
      const links = value as Link[];
      let out = `${tag}[${links.length}]`;
      for (const l of links) out += hashField(tag, l.ID);
      return out;
    }
    case 'serviceIdentities': {
      const ids = value as ServiceIdentity[];
      let out = `${tag}[${ids.length}]`;
      for (const s of ids) out += hashField(tag, `${s.ServiceName}@${(s.Datacenters ?? []).join(',')}`);
      return out;
    }
    case 'nodeIdentities': {
      const ids = value as NodeIdentity[];
      let out = `${tag}[${ids.length}]`;
      for (const n of ids) out += hashField(tag, `${n.NodeName}@${n.Datacenter}`);
      return out;
    }
    case 'templatedPolicies': {
      const links = value as TemplatedPolicyLink[];
      let out = `${tag}[${links.length}]`;
      for (const t of links)
        out += hashField(tag, `${t.TemplateName}|${t.TemplateVariables?.name ?? ''}|${(t.Datacenters ?? []).join(',')}`);
      return out;
    }
    case 'strings': {
      const vs = (value as string[] | undefined) ?? [];
      let out = `${tag}[${vs.length}]`;
      for (const v of vs) out += hashField(tag, v);
      return out;
    }
    default:
      return hashField(tag, String(value ?? ''));
  }
}

/**
 * The content Hash's text of a record (hashed with SHA-256 by domain/hash.ts): each hashed
 * field in its hash order, written with its tag and length so no two contents give one stream.
 */
export function hashInput<F extends FieldTable>(fields: F): (record: Partial<RecordOf<F>>) => string {
  const plan = Object.entries(fields)
    .filter(([, spec]) => spec.hash !== undefined)
    .map(([name, spec]) => ({
      name,
      kind: spec.kind,
      tag: (spec.hash as { tag: string }).tag,
      at: (spec.hash as { at: number }).at,
      // A field of a later form adds nothing while absent: a record without it hashes as it did before the field existed.
      later: (spec.form ?? 1) > 1,
    }))
    .sort((a, b) => a.at - b.at);
  return (record) => {
    let text = '';
    for (const p of plan) {
      const value = (record as Record<string, unknown>)[p.name];
      if (p.later && (value === undefined || value === '')) continue;
      text += hashText(p.kind, value, p.tag);
    }
    return text;
  };
}

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
