import type { PolicyResponse, RoleResponse, TokenResponse } from '../api/schemas.js';
import { tokenHash } from '../domain/hash.js';
import type { NamedLink, PolicyRecord, RoleRecord, TokenRecord } from '../domain/types.js';

/**
 * JSON text of a value, already serialised (from a cache of views); sent as it is. Its UTF-8
 * bytes are made once, on first use, so a cached view is not encoded again per answer.
 */
export class JSONText {
  private str: string | undefined;
  private buf: Buffer | undefined;

  constructor(json: string | Buffer) {
    if (typeof json === 'string') this.str = json;
    else this.buf = json;
  }

  get text(): string {
    this.str ??= (this.buf as Buffer).toString('utf8');
    return this.str;
  }

  get bytes(): Buffer {
    this.buf ??= Buffer.from(this.str as string, 'utf8');
    return this.buf;
  }

  /** A JSON array of these values, copied byte for byte. */
  static array(items: readonly JSONText[]): JSONText {
    if (items.length === 0) return new JSONText('[]');
    let length = 1 + items.length;
    for (const item of items) length += item.bytes.length;
    const out = Buffer.allocUnsafe(length);
    let at = 0;
    items.forEach((item, i) => {
      out[at++] = i === 0 ? 0x5b /* [ */ : 0x2c; /* , */
      at += item.bytes.copy(out, at);
    });
    out[at] = 0x5d; /* ] */
    return new JSONText(out);
  }
}

/** What a caller without acl:write sees in place of a secret. */
export const REDACTED = '<hidden>';

/**
 * Response shapes come from the wire contract (src/api/schemas.ts), so the server,
 * the OpenAPI document and the client share one definition. Empty arrays are omitted
 * (as Consul does); Description and Local are always present; key order follows Consul's.
 */
export type TokenView = TokenResponse;
export type PolicyView = PolicyResponse;
export type RoleView = RoleResponse;

const some = <T>(list: readonly T[] | undefined): T[] | undefined => (list && list.length > 0 ? [...list] : undefined);

function compact<T extends object>(obj: T): T {
  for (const k of Object.keys(obj) as Array<keyof T>) if (obj[k] === undefined) delete obj[k];
  return obj;
}

/**
 * `hash`: the content hash when the caller has just computed it from this record's content
 * (a create); otherwise it is computed here, never taken from the stored field.
 */
export function tokenView(
  t: TokenRecord,
  links: { policies: NamedLink[]; roles: NamedLink[] },
  showSecret: boolean,
  hash?: string,
): TokenView {
  return compact<TokenView>({
    AccessorID: t.AccessorID,
    SecretID: showSecret ? t.SecretID : REDACTED,
    Description: t.Description,
    Policies: some(links.policies),
    Roles: some(links.roles),
    ServiceIdentities: some(t.ServiceIdentities),
    NodeIdentities: some(t.NodeIdentities),
    TemplatedPolicies: some(t.TemplatedPolicies),
    Local: t.Local,
    AuthMethod: t.AuthMethod || undefined,
    AuthMethodNamespace: t.AuthMethod ? t.AuthMethodNamespace : undefined,
    ExpirationTime: t.ExpirationTime,
    CreateTime: t.CreateTime,
    // From the content, not the stored field: a hash is never taken on trust (README, "Security").
    Hash: hash ?? tokenHash(t),
    Namespace: t.Namespace,
    Partition: t.Partition,
    CreateIndex: t.CreateIndex,
    ModifyIndex: t.ModifyIndex,
  });
}

export function policyView(p: PolicyRecord, withRules = true): PolicyView {
  return compact<PolicyView>({
    ID: p.ID,
    Name: p.Name,
    Description: p.Description,
    Rules: withRules ? p.Rules : undefined,
    Datacenters: some(p.Datacenters),
    Hash: p.Hash,
    Namespace: p.Namespace,
    Partition: p.Partition,
    CreateIndex: p.CreateIndex,
    ModifyIndex: p.ModifyIndex,
  });
}

export function roleView(r: RoleRecord, policies: NamedLink[]): RoleView {
  return compact<RoleView>({
    ID: r.ID,
    Name: r.Name,
    Description: r.Description,
    Policies: some(policies),
    ServiceIdentities: some(r.ServiceIdentities),
    NodeIdentities: some(r.NodeIdentities),
    TemplatedPolicies: some(r.TemplatedPolicies),
    Hash: r.Hash,
    Namespace: r.Namespace,
    Partition: r.Partition,
    CreateIndex: r.CreateIndex,
    ModifyIndex: r.ModifyIndex,
  });
}
