import { createHash } from 'node:crypto';
import { invalid } from '../domain/errors.js';
import { DEFAULT_NAMESPACE, DEFAULT_PARTITION } from '../domain/ids.js';
import { type Access, RESOURCES } from '../domain/rules/decisions.js';
import { explain } from '../domain/rules/explain.js';
import type { Reason } from '../domain/rules/explain-types.js';
import type { Store, WatchTable } from '../store/store.js';
import type { TokenRecord } from '../domain/types.js';
import type { AclResolver, Identity } from './acl-resolver.js';
import type { TokenAuthorizerResponse } from '../api/schemas.js';
import type { RecentChecks } from './recent-checks.js';
import type { RequestContext } from './context.js';
import { type ScopeHints, checkScopeName } from './scope.js';

/** One question: may the request's token have `Access` to `Resource` (`Segment`)? As asked, with the answer. */
export interface AuthorizationAnswer {
  Resource: string;
  Segment?: string;
  Access: string;
  Namespace?: string;
  Partition?: string;
  Allow: boolean;
}

/** Checks with their answers. */
export interface Judged {
  checks: Check[];
  allows: boolean[];
}

/** A check as parsed: what was given (echoed back as given) and the access it means. */
export interface Check {
  resource: string;
  segment: string | undefined;
  /** Access as given (echoed); `access` is its lower case (Consul lower-cases it). */
  accessText: string;
  access: Access;
  namespace: string | undefined;
  partition: string | undefined;
}

export const MAX_CHECKS = 64;
const MAX_SEGMENT = 4096;

function fail(i: number, message: string): never {
  throw invalid(`checks[${i}]: ${message}`);
}

const FIELD_NAMES = ['Resource', 'Segment', 'Access', 'Namespace', 'Partition'] as const;
type Field = (typeof FIELD_NAMES)[number];
const FIELD_OF = new Map<string, Field>(FIELD_NAMES.map((f) => [f.toLowerCase(), f]));

function fieldValue(i: number, name: Field, value: unknown): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value !== 'string') fail(i, `${name} must be a string`);
  return value;
}

/** One element: fields matched case-insensitively and each checked, the resource and access known. */
function parseCheck(raw: unknown, i: number): Check {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) fail(i, 'must be an object {"Resource", "Segment", "Access"}');
  let resource: string | undefined;
  let segment: string | undefined;
  let accessText: string | undefined;
  let namespace: string | undefined;
  let partition: string | undefined;
  let seen = 0;
  for (const key in raw) {
    if (!Object.hasOwn(raw, key)) continue;
    // The canonical names come first: no lower-casing for what clients normally send.
    const name = (FIELD_NAMES as readonly string[]).includes(key) ? (key as Field) : FIELD_OF.get(key.toLowerCase());
    if (name === undefined) fail(i, `unknown field ${JSON.stringify(key)}`);
    const bit = 1 << FIELD_NAMES.indexOf(name);
    if (seen & bit) fail(i, `field ${JSON.stringify(name)} is given more than once`);
    seen |= bit;
    const value = fieldValue(i, name, (raw as Record<string, unknown>)[key]);
    if (name === 'Resource') resource = value;
    else if (name === 'Segment') segment = value;
    else if (name === 'Access') accessText = value;
    else if (name === 'Namespace') namespace = value;
    else partition = value;
  }
  if (resource === undefined || resource === '') fail(i, 'Resource is required');
  const spec = Object.hasOwn(RESOURCES, resource) ? RESOURCES[resource] : undefined;
  if (spec === undefined) fail(i, `unknown resource ${JSON.stringify(resource)}; one of ${Object.keys(RESOURCES).join(', ')}`);
  if (accessText === undefined || accessText === '') fail(i, 'Access is required');
  const access = (spec.accesses.includes(accessText as Access) ? accessText : accessText.toLowerCase()) as Access;
  if (!spec.accesses.includes(access))
    fail(i, `access ${JSON.stringify(accessText)} is not one of ${spec.accesses.join(', ')} for resource ${JSON.stringify(resource)}`);
  if (spec.segmented && segment === undefined)
    fail(i, `resource ${JSON.stringify(resource)} needs a Segment (the name of the ${resource})`);
  if (segment !== undefined && segment.length > MAX_SEGMENT) fail(i, `Segment is longer than ${MAX_SEGMENT} characters`);
  if (namespace !== undefined && namespace !== '') checkName(i, 'namespace', namespace);
  if (partition !== undefined && partition !== '') checkName(i, 'partition', partition);
  return { resource, segment, accessText, access, namespace: namespace || undefined, partition: partition || undefined };
}

function checkName(i: number, kind: 'namespace' | 'partition', value: string): void {
  try {
    checkScopeName(kind, value);
  } catch (err) {
    fail(i, (err as Error).message);
  }
}

/** The request body: an array of 1 to 64 checks. A 400 names the first bad element. */
export function parseChecks(body: unknown): Check[] {
  if (!Array.isArray(body))
    throw invalid('Request decode failed: the body must be a JSON array of checks [{"Resource", "Segment", "Access"}]');
  if (body.length === 0) throw invalid('Request decode failed: at least one check is required');
  if (body.length > MAX_CHECKS) throw invalid(`Request decode failed: at most ${MAX_CHECKS} checks per request, got ${body.length}`);
  const checks: Check[] = new Array(body.length);
  for (let i = 0; i < body.length; i++) checks[i] = parseCheck(body[i], i);
  return checks;
}

/**
 * The answers to checks for one identity. Each check is judged where it names (its
 * Namespace/Partition), else where the request points (`?ns=`, headers), else where the
 * token lives (docs/http-api.md, "HTTP API"'s order).
 */
export function judge(identity: Identity, checks: readonly Check[], hints: ScopeHints): boolean[] {
  const { partition, namespace } = placeOf(identity, hints);
  const authz = identity.authorizer;
  const out: boolean[] = new Array(checks.length);
  for (let i = 0; i < checks.length; i++) {
    const c = checks[i] as Check;
    out[i] = authz.allows(c.resource, c.segment ?? '', c.access, c.partition ?? partition, c.namespace ?? namespace);
  }
  return out;
}

function placeOf(identity: Identity, hints: ScopeHints): { partition: string; namespace: string } {
  const token = identity.token;
  return {
    partition: hints.partition || token.Partition || DEFAULT_PARTITION,
    namespace: hints.namespace || token.Namespace || DEFAULT_NAMESPACE,
  };
}

/** The answers with their reasons (`?explain`): each check's deciding source and rule, and the rule that lost. */
export function judgeExplained(identity: Identity, checks: readonly Check[], hints: ScopeHints): { allows: boolean[]; reasons: Reason[] } {
  const { partition, namespace } = placeOf(identity, hints);
  const allows: boolean[] = [];
  const reasons: Reason[] = [];
  for (const c of checks) {
    const e = explain(identity.authorizer, c.resource, c.segment ?? '', c.access, c.partition ?? partition, c.namespace ?? namespace);
    allows.push(e.allow);
    reasons.push(e.reason);
  }
  return { allows, reasons };
}

/** The answer as JSON text: each check as it was asked (canonical field names), with Allow (and Reason when explained). */
export function answersJSON(checks: readonly Check[], allows: readonly boolean[], reasons?: readonly Reason[]): string {
  let out = '[';
  for (let i = 0; i < checks.length; i++) {
    const c = checks[i] as Check;
    if (i > 0) out += ',';
    out += `{"Resource":${JSON.stringify(c.resource)}`;
    if (c.segment !== undefined) out += `,"Segment":${JSON.stringify(c.segment)}`;
    out += `,"Access":${JSON.stringify(c.accessText)}`;
    if (c.namespace !== undefined) out += `,"Namespace":${JSON.stringify(c.namespace)}`;
    if (c.partition !== undefined) out += `,"Partition":${JSON.stringify(c.partition)}`;
    out += allows[i] ? ',"Allow":true' : ',"Allow":false';
    out += reasons ? `,"Reason":${JSON.stringify(reasons[i])}}` : '}';
  }
  return `${out}]`;
}

/** The view with its content hash: a blocking read of it returns when the hash moves. */
export interface TokenAuthorizerAnswer {
  view: TokenAuthorizerResponse;
  hash: string;
}

/** A token's view for a watch, with its AccessorID and the policies and roles it depends on. */
export type WatchedView = TokenAuthorizerAnswer & { accessor: string; dependsOn: string[] };

/** The tables whose changes can change what a token may do. */
const JUDGING_TABLES: readonly WatchTable[] = ['tokens', 'policies', 'roles'];

/** Judges checks for the request's token (docs/enforcing-client.md, "Enforcing policies in your service"): the authorization service's question. */
export class DecisionService {
  constructor(
    private readonly resolver: AclResolver,
    private readonly store: Pick<Store, 'tableIndex' | 'waitForTableIndex'>,
    /** Where the checks asked are noted, for dry runs (none: not noted). */
    private readonly recent?: RecentChecks,
  ) {}

  /** Judges, and notes each check asked for the token (recent-checks.ts). */
  private judged(identity: Identity, checks: Check[], hints: ScopeHints, text: string | undefined): Judged {
    const allows = judge(identity, checks, hints);
    this.note(identity, checks, hints, text);
    return { checks, allows };
  }

  /** Notes the checks asked for the identity's token (recent-checks.ts); a request seen in this quarter hour already, at once. */
  private note(identity: Identity, checks: readonly Check[], hints: ScopeHints, text?: string): void {
    if (this.recent === undefined) return;
    const accessorID = identity.token.AccessorID;
    // The body alone names the request when no place is hinted (most requests): no string made.
    const request =
      text === undefined || (!hints.partition && !hints.namespace)
        ? text
        : `${hints.partition ?? ''}\u0000${hints.namespace ?? ''}\u0000${text}`;
    if (request !== undefined && this.recent.seenRequest(accessorID, request)) return;
    const { partition, namespace } = placeOf(identity, hints);
    for (const c of checks)
      this.recent.record(accessorID, c.resource, c.segment, c.access, c.partition ?? partition, c.namespace ?? namespace);
  }

  /**
   * Needs no permission: any token may ask what it may do. An unknown secret is 403 ACL not
   * found. Synchronous unless a secondary must ask the primary about a secret it lacks.
   */
  authorize(ctx: RequestContext, body: unknown, text?: string): Judged | Promise<Judged> {
    const checks = parseChecks(body);
    const identity = this.resolver.resolve(ctx.secret, ctx.client);
    if (identity instanceof Promise) return identity.then((id) => this.judged(id, checks, ctx.hints, text));
    return this.judged(identity, checks, ctx.hints, text);
  }

  /** `?explain`: the same answers, each with its reason. */
  async explain(ctx: RequestContext, body: unknown): Promise<Judged & { reasons: Reason[] }> {
    const checks = parseChecks(body);
    const identity = await this.resolver.resolve(ctx.secret, ctx.client);
    this.note(identity, checks, ctx.hints);
    return { checks, ...judgeExplained(identity, checks, ctx.hints) };
  }

  /**
   * The request's own token as an enforcing client compiles it: like token/self, any token
   * may read what applies to itself (Consul lets a token resolve its own policies).
   */
  async tokenAuthorizer(ctx: RequestContext): Promise<TokenAuthorizerAnswer> {
    const identity = await this.resolver.resolve(ctx.secret, ctx.client);
    return this.viewOf(identity);
  }

  /**
   * What an enforcing client compiles for this secret, from this server's state alone (a watch
   * of a set of tokens: docs/enforcing-client.md, "Enforcing policies in your service"), with the IDs of the
   * policies and roles it depends on. Throws as a read would (unknown, expired, stale).
   */
  watchedView(secret: string): WatchedView {
    const identity = this.resolver.resolveLocal(secret);
    const token = identity.token;
    if (identity.unconfirmed) return { ...this.viewOf(identity), accessor: token.AccessorID, dependsOn: [] };
    // A secret a rotation replaced: its own view (it ends with the overlap), not memoised with the current secret's.
    if (identity.secretEnds !== undefined)
      return { ...this.viewOf(identity), accessor: token.AccessorID, dependsOn: dependsOn(token, this.resolver) };
    // Many clients watch the same token: its view is made once until it, a policy or a role changes.
    const policies = this.store.tableIndex('policies');
    const roles = this.store.tableIndex('roles');
    const memo = this.watchedViews.get(token);
    if (memo !== undefined && memo.policies === policies && memo.roles === roles) return memo.view;
    const view = { ...this.viewOf(identity), accessor: token.AccessorID, dependsOn: dependsOn(token, this.resolver) };
    this.watchedViews.set(token, { policies, roles, view });
    return view;
  }

  /** Views of watched tokens by record (records are replaced on every write, never changed). */
  private readonly watchedViews = new WeakMap<TokenRecord, { policies: number; roles: number; view: WatchedView }>();

  private viewOf(identity: Identity): TokenAuthorizerAnswer {
    const token = identity.token;
    const expires = secretExpiry(identity);
    const view: TokenAuthorizerResponse = {
      AccessorID: token.AccessorID,
      Namespace: token.Namespace || DEFAULT_NAMESPACE,
      Partition: token.Partition || DEFAULT_PARTITION,
      ...(expires ? { ExpirationTime: expires } : {}),
      DefaultPolicy: this.resolver.defaultPolicy,
      Policies: identity.unconfirmed
        ? []
        : this.resolver
            .applicablePolicies(token)
            .map((p) => ({ ID: p.ID, Rules: p.Rules, Namespace: p.Namespace, Partition: p.Partition, Builtin: p.Builtin })),
    };
    return { view, hash: createHash('sha256').update(JSON.stringify(view)).digest('hex').slice(0, 16) };
  }

  /**
   * Resolves once what the token may do differs from `hash` (or the token is gone), or the
   * signal aborts. Wakes on every change of the tokens, policies and roles tables; the view
   * is hashed again only when this token's record or the policy or role table moved (another
   * token's write costs a look-up, not a view and a hash per watcher). Nothing polls.
   */
  async waitForChange(ctx: RequestContext, hash: string, signal: AbortSignal): Promise<void> {
    const seen = JUDGING_TABLES.map((t) => this.store.tableIndex(t));
    let judged: { token: unknown; policies: number; roles: number } | undefined;
    for (;;) {
      try {
        const identity = this.resolver.resolveLocal(ctx.secret);
        const now = { token: identity.token, policies: this.store.tableIndex('policies'), roles: this.store.tableIndex('roles') };
        if (judged === undefined || judged.token !== now.token || judged.policies !== now.policies || judged.roles !== now.roles) {
          if (this.viewOf(identity).hash !== hash) return;
          judged = now;
        }
      } catch {
        return; // gone or expired: the read answers 403
      }
      if (signal.aborted) return;
      const inner = new AbortController();
      const stop = (): void => inner.abort();
      signal.addEventListener('abort', stop, { once: true });
      try {
        await Promise.race(JUDGING_TABLES.map((t, k) => this.store.waitForTableIndex(t, seen[k] as number, inner.signal)));
      } finally {
        inner.abort();
        signal.removeEventListener('abort', stop);
      }
      if (signal.aborted) return;
      for (let k = 0; k < JUDGING_TABLES.length; k++) seen[k] = this.store.tableIndex(JUDGING_TABLES[k] as WatchTable);
    }
  }
}

/** The IDs of the policies and roles a token's view depends on (a watch wakes when one changes). */
function dependsOn(token: TokenRecord, resolver: AclResolver): string[] {
  const ids = new Set<string>();
  for (const l of token.Policies) ids.add(l.ID);
  for (const l of token.Roles ?? []) ids.add(l.ID);
  for (const r of resolver.reachable(token).roles) for (const l of r.Policies) ids.add(l.ID);
  return [...ids];
}

/**
 * When the secret presented stops working, as an enforcing client is told it (`ExpirationTime`):
 * the token's expiry, or for a secret a rotation replaced the end of its overlap when earlier.
 */
/**
 * The view as it is sent at `nowMs`: with the seconds its secret has left when it ends (a client
 * judges that on its monotonic clock). Made when sent, never kept: the hash covers the view without it.
 */
export function withSecondsLeft(view: TokenAuthorizerResponse, nowMs: number): TokenAuthorizerResponse {
  if (view.ExpirationTime === undefined) return view;
  const left = Math.max(0, Date.parse(view.ExpirationTime) - nowMs) / 1000;
  return { ...view, SecondsLeft: Math.round(left * 1000) / 1000 };
}

function secretExpiry(identity: Identity): string | undefined {
  const own = identity.token.ExpirationTime;
  if (identity.secretEnds === undefined) return own;
  if (own !== undefined && Date.parse(own) <= identity.secretEnds) return own;
  return new Date(identity.secretEnds).toISOString();
}
