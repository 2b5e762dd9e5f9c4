import type { Clock } from '../domain/clock.js';
import { WatchwordError } from '../domain/errors.js';
import { DEFAULT_NAMESPACE, DEFAULT_PARTITION } from '../domain/ids.js';
import { tokenHolding } from '../domain/token.js';
import type { PolicyRecord, RoleRecord, TokenRecord } from '../domain/types.js';
import type { Authorizer } from '../domain/rules/authorizer.js';
import { RESOURCES } from '../domain/rules/decisions.js';
import { explain } from '../domain/rules/explain.js';
import { reasonText } from '../domain/rules/explain-types.js';
import { type UnheldGrant, firstUnheld } from '../domain/rules/grant-limit.js';
import type { StateReader } from '../store/memory.js';
import type { RecordTypes, TableName } from '../store/schema.js';
import type { Store, Tx } from '../store/store.js';
import { AclResolver, type Identity } from './acl-resolver.js';

/** Where the roles and policies a write links are read: its transaction, or the state with a proposed record over it (a dry run). */
export type Records = Pick<Tx, 'getRecord'>;

/** The durable state with `next` in place of the record of its ID (a dry run's proposed change). */
export function withProposed(reader: StateReader, table: 'policies' | 'roles', next: PolicyRecord | RoleRecord): Records {
  const getRecord = <T extends TableName>(t: T, id: string): RecordTypes[T] | undefined =>
    (t === table && id === next.ID ? next : reader.getRecords(t, [id])[0]) as RecordTypes[T] | undefined;
  return { getRecord };
}

/** `acl_grant_limit`: Consul's behaviour (acl:write grants anything), or grants limited to what the caller holds. */
export type GrantLimitMode = 'consul' | 'holder';

/**
 * No escalation (docs/security.md, "Grants limited to the granter's own"). With
 * `acl_grant_limit = "holder"` a caller makes or changes a token, role or policy only when every
 * rule the result would grant is one it holds itself, judged by the resolver every decision uses
 * (domain/rules/grant-limit.ts), in this datacenter and in every one the result's policies and
 * identities name. It runs inside the write's transaction, after the record is put: the roles and
 * policies it reads are the ones the write sees, accepted writes not yet durable included.
 */
export class GrantLimit {
  constructor(
    readonly mode: GrantLimitMode,
    private readonly store: Pick<Store, 'reader'>,
    private readonly resolver: AclResolver,
    private readonly clock: Clock,
    private readonly datacenter: string,
  ) {}

  /** Throws 403 unless the caller holds every rule `token` grants; `tx` (or a view like it) reads the roles and policies it links. */
  token(identity: Identity, token: TokenRecord, tx: Records): void {
    if (this.mode === 'holder') this.judge(identity, token, tx, 'the token');
  }

  /** Throws 403 unless the caller holds every rule `role` grants (to a token of its place linking it). */
  role(identity: Identity, role: RoleRecord, tx: Records): void {
    if (this.mode === 'holder')
      this.judge(identity, tokenHolding('', role, { Roles: [{ ID: role.ID }] }), tx, `role ${JSON.stringify(role.Name)}`);
  }

  /** Throws 403 unless the caller holds every rule `policy` grants (to a token of its place linking it). */
  policy(identity: Identity, policy: PolicyRecord, tx: Records): void {
    if (this.mode === 'holder')
      this.judge(identity, tokenHolding('', policy, { Policies: [{ ID: policy.ID }] }), tx, `policy ${JSON.stringify(policy.Name)}`);
  }

  private judge(identity: Identity, subject: TokenRecord, tx: Records, what: string): void {
    const here = this.resolverIn(this.datacenter, tx);
    const { policies, synthetic } = here.reachable(subject);
    const elsewhere = new Set<string>();
    for (const p of [...policies, ...synthetic]) for (const dc of p.Datacenters ?? []) if (dc !== this.datacenter) elsewhere.add(dc);
    const judged: Array<[string, Authorizer, Authorizer]> = [[this.datacenter, identity.authorizer, here.compileOnce(subject)]];
    for (const dc of [...elsewhere].sort()) {
      const there = this.resolverIn(dc, tx);
      judged.push([dc, there.compileOnce(identity.token), there.compileOnce(subject)]);
    }
    for (const [dc, holder, granted] of judged) {
      const unheld = firstUnheld(holder, granted);
      if (unheld !== undefined) throw refusal(identity, holder, unheld, what, dc === this.datacenter ? undefined : dc);
    }
  }

  /** A resolver judging as datacenter `dc` would, reading roles and policies as the transaction sees them. */
  private resolverIn(dc: string, tx: Records): AclResolver {
    return new AclResolver({ reader: throughTx(this.store.reader, tx), tableIndex: () => -1 }, this.clock, {
      datacenter: dc,
      defaultPolicy: this.resolver.defaultPolicy,
    });
  }
}

/** The state as `tx` sees it for the roles and policies a resolver reads. */
function throughTx(reader: StateReader, tx: Records): StateReader {
  const getRecords = <T extends TableName>(table: T, ids: readonly string[]): Array<RecordTypes[T]> => {
    const out: Array<RecordTypes[T]> = [];
    for (const id of ids) {
      const r = tx.getRecord(table, id);
      if (r !== undefined) out.push(r);
    }
    return out;
  };
  return new Proxy(reader, {
    get(target, prop, receiver) {
      if (prop === 'getRecords') return getRecords;
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

const checkText = (u: UnheldGrant): string =>
  `'${u.resource}:${u.access}'${RESOURCES[u.resource]?.segmented ? ` on ${JSON.stringify(u.segment)}` : ''}`;

function placeText(u: UnheldGrant): string {
  const parts: string[] = [];
  if (u.partition !== DEFAULT_PARTITION) parts.push(`partition ${JSON.stringify(u.partition)}`);
  if (u.namespace !== DEFAULT_NAMESPACE) parts.push(`namespace ${JSON.stringify(u.namespace)}`);
  return parts.length > 0 ? ` in ${parts.join(' ')}` : '';
}

/** 403: the first rule the result would grant that the caller does not hold, and the caller's rule that decided so. */
function refusal(identity: Identity, holder: Authorizer, u: UnheldGrant, what: string, dc: string | undefined): WatchwordError {
  const { reason } = explain(holder, u.resource, u.segment, u.access, u.partition, u.namespace);
  const caller = identity.anonymous ? 'the anonymous token' : `token with AccessorID '${identity.token.AccessorID}'`;
  return new WatchwordError(
    'PERMISSION_DENIED',
    `Permission denied: ${what} would grant ${checkText(u)}${placeText(u)}${dc ? ` in datacenter ${JSON.stringify(dc)}` : ''}, which ` +
      `${caller} does not hold (acl_grant_limit = "holder"); decided by ${reasonText(reason)}`,
    { decision: reason },
  );
}
