import { hash } from 'node:crypto';
import type { PolicyRecord, RoleRecord, TokenRecord } from './types.js';

/**
 * Content hashes: base64 SHA-256 over the fields that describe what an object grants,
 * never IDs, secrets, times or indexes, so the same object hashes the same in every
 * datacenter. Each field is written with a tag and a length so no two different
 * contents can produce the same byte stream.
 */
class HashWriter {
  /** The byte stream, hashed once at the end (one native call rather than one per field). */
  private text = '';

  field(tag: string, value: string): this {
    this.text += `${tag}:${Buffer.byteLength(value)}:${value};`;
    return this;
  }

  list(tag: string, values: readonly string[]): this {
    this.text += `${tag}[${values.length}]`;
    for (const v of values) this.field(tag, v);
    return this;
  }

  digest(): string {
    // The one-shot form: no Hash object per digest.
    return hash('sha256', this.text, 'base64');
  }
}

type Grants = Pick<TokenRecord, 'Policies' | 'ServiceIdentities' | 'NodeIdentities' | 'TemplatedPolicies'>;

function writeGrants(w: HashWriter, g: Grants): void {
  w.list(
    'policy',
    g.Policies.map((l) => l.ID),
  );
  w.list(
    'service',
    g.ServiceIdentities.map((s) => `${s.ServiceName}@${(s.Datacenters ?? []).join(',')}`),
  );
  w.list(
    'node',
    g.NodeIdentities.map((n) => `${n.NodeName}@${n.Datacenter}`),
  );
  w.list(
    'template',
    g.TemplatedPolicies.map((t) => `${t.TemplateName}|${t.TemplateVariables?.name ?? ''}|${(t.Datacenters ?? []).join(',')}`),
  );
}

export function tokenHash(t: Pick<TokenRecord, 'Description' | 'Local' | 'Roles' | keyof Grants>): string {
  const w = new HashWriter().field('description', t.Description).field('locality', t.Local ? 'local' : 'global');
  w.list(
    'role',
    t.Roles.map((l) => l.ID),
  );
  writeGrants(w, t);
  return w.digest();
}

export function roleHash(r: Pick<RoleRecord, 'Name' | 'Description' | keyof Grants>): string {
  const w = new HashWriter().field('name', r.Name).field('description', r.Description);
  writeGrants(w, r);
  return w.digest();
}

export function policyHash(p: Pick<PolicyRecord, 'Name' | 'Description' | 'Rules' | 'Datacenters'>): string {
  return new HashWriter()
    .field('name', p.Name)
    .field('description', p.Description)
    .field('rules', p.Rules)
    .list('datacenters', p.Datacenters ?? [])
    .digest();
}

/** A stable short ID for rendered (synthetic) policies: the same rules give the same ID. */
export function syntheticPolicyID(rules: string): string {
  const hex = hash('sha256', rules, 'hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
