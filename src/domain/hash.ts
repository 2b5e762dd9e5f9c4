// Content hashes: base64 SHA-256 over the fields that describe what an object grants (those
// domain/records.ts marks `hash`), never IDs, secrets, times or indexes, so the same object
// hashes the same in every datacenter. Each field is written with a tag and a length so no
// two different contents can produce the same byte stream.
import { hash } from 'node:crypto';
import {
  type ContentOf,
  type FieldKind,
  type FieldSpec,
  type FieldTable,
  type Link,
  type NodeIdentity,
  POLICY_FIELDS,
  ROLE_FIELDS,
  type RecordOf,
  type ServiceIdentity,
  TOKEN_FIELDS,
  type TemplatedPolicyLink,
  hashedFieldsOf,
} from './records.js';

/** One value in the hash's text: its tag, its length in bytes, itself. */
const hashField = (tag: string, v: string): string => `${tag}:${Buffer.byteLength(v)}:${v};`;

/** A list's part: its tag and length, then each item as a value. */
function hashList<T>(tag: string, items: readonly T[] | undefined, text: (item: T) => string): string {
  const list = items ?? [];
  let out = `${tag}[${list.length}]`;
  for (const item of list) out += hashField(tag, text(item));
  return out;
}

/** An object as JSON with its keys sorted at every depth: two objects equal by content write one text. */
function canonicalJSON(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJSON).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJSON(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * A field's part of the hash's text, by kind (each kind written as it always was: the Hash is
 * kept across versions). Every kind is named: a kind added to FieldKind does not compile until
 * it says how it hashes. Written straight into one string: every write hashes its record.
 */
function hashText(kind: FieldKind, value: unknown, tag: string): string {
  switch (kind) {
    case 'boolean':
      // A token's locality is the one boolean hashed.
      return hashField(tag, value ? 'local' : 'global');
    case 'links':
      return hashList(tag, value as Link[], (l) => l.ID);
    case 'serviceIdentities':
      return hashList(tag, value as ServiceIdentity[], (s) => `${s.ServiceName}@${(s.Datacenters ?? []).join(',')}`);
    case 'nodeIdentities':
      return hashList(tag, value as NodeIdentity[], (n) => `${n.NodeName}@${n.Datacenter}`);
    case 'templatedPolicies':
      return hashList(
        tag,
        value as TemplatedPolicyLink[],
        (t) => `${t.TemplateName}|${t.TemplateVariables?.name ?? ''}|${(t.Datacenters ?? []).join(',')}`,
      );
    case 'strings':
      return hashList(tag, value as string[] | undefined, (v) => v);
    case 'string':
    case 'time':
    case 'tokenLocality':
    case 'bindType':
      return hashField(tag, (value as string | undefined) ?? '');
    case 'index':
      return hashField(tag, String((value as number | undefined) ?? ''));
    case 'config':
    case 'bindVars':
      return hashField(tag, canonicalJSON(value ?? {}));
    default:
      return unhashable(kind);
  }
}

function unhashable(kind: never): never {
  throw new Error(`no hash text for field kind ${String(kind)}`);
}

/**
 * The content Hash's text of a record (hashed with SHA-256 by domain/hash.ts): each hashed
 * field in its hash order, written with its tag and length so no two contents give one stream.
 */
export function hashInput<F extends FieldTable>(fields: F): (record: Partial<RecordOf<F>>) => string {
  // The fields contentOf() takes, in their hash order.
  const plan = hashedFieldsOf(fields)
    .map((name) => ({ name, spec: fields[name] as FieldSpec & { hash: { tag: string; at: number } } }))
    .map(({ name, spec }) => ({
      name,
      kind: spec.kind,
      tag: spec.hash.tag,
      at: spec.hash.at,
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

export const tokenHash = (t: ContentOf<typeof TOKEN_FIELDS>): string => digest(tokenText(t));
export const roleHash = (r: ContentOf<typeof ROLE_FIELDS>): string => digest(roleText(r));
export const policyHash = (p: ContentOf<typeof POLICY_FIELDS>): string => digest(policyText(p));

/** A stable short ID for rendered (synthetic) policies: the same rules give the same ID. */
export function syntheticPolicyID(rules: string): string {
  const hex = hash('sha256', rules, 'hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
