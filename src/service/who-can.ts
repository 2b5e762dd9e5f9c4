import { WatchwordError, invalid } from '../domain/errors.js';
import { RateLimiter } from '../transport/rate-limit.js';
import { isExpired } from '../domain/expiry.js';
import type { Clock } from '../domain/clock.js';
import { type Access, TABLE_OF, enforce } from '../domain/rules/decisions.js';
import { explain } from '../domain/rules/explain.js';
import type { Reason } from '../domain/rules/explain-types.js';
import type { AccessLevel, ScopeRules } from '../domain/rules/policy.js';
import { findTemplate, nodeIdentityPolicy, renderTemplate, serviceIdentityPolicy } from '../domain/templates.js';
import type { RoleRecord, TokenRecord } from '../domain/types.js';
import { tokenHolding } from '../domain/token.js';
import type { StateReader } from '../store/store.js';
import type { AclResolver } from './acl-resolver.js';
import type { RequestContext } from './context.js';
import { type Check, parseChecks } from './decisions.js';
import { authorize, readableBy } from './permissions.js';

/**
 * Who can (docs/operator-insight.md): the tokens and roles of one place granted a check, each with its reason.
 * Never by compiling every token: the policies, roles, identities and templates whose rules
 * could grant the check are found first (small tables, or a name), the tokens that hold one
 * come from the indexes by policy, role, identity and template, and only those are judged,
 * one page at a time in AccessorID order. When what grants is everywhere (the default policy
 * `allow`, a rule every service identity renders) the namespace's tokens are walked in order
 * instead, each page bounded; the answer's `NextCursor` goes on from where it stopped.
 */

export interface WhoCanQuery {
  resource: string | undefined;
  segment: string | undefined;
  access: string | undefined;
  limit: string | undefined;
  cursor: string | undefined;
}

export interface WhoCanAnswer {
  Resource: string;
  Segment?: string;
  Access: string;
  Namespace: string;
  Partition: string;
  /** The tokens granted, in AccessorID order, each with why. */
  Tokens: Array<{ AccessorID: string; Description: string; Local: boolean; Reason: Reason }>;
  /** The roles that grant it by themselves (first page only), by name. */
  Roles?: Array<{ ID: string; Name: string; Reason: Reason }>;
  /** Where the next page starts; absent on the last. */
  NextCursor?: string;
  /** Tokens looked at for this page (judged or passed over). */
  Scanned: number;
}

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;
/** Tokens one page may look at: each request is bounded whatever the store holds. */
const SCAN_BUDGET = 20_000;
/** Above this many tokens reached through candidate grants, the namespace is walked in order instead of collecting them. */
const COLLECT_MAX = 200_000;
/** A name no rule can be about: what an identity's rules grant whatever its name (`service_prefix ""`). */
const ANY_NAME = '\u0000who-can';
const SIDECAR = '-sidecar-proxy';
/** Checks whose candidates are kept for their next pages, and the AccessorIDs they may hold in all. */
const KEPT_CHECKS = 32;
const KEPT_IDS = 400_000;
/** Checks one caller may have found anew (not from what is kept) in a minute; past it, 429. */
const COLD_PER_MINUTE = 30;

/** Whether a rule of this level allows the access (write-prefix: only write). */
function levelAllows(level: AccessLevel | undefined, access: Access): boolean {
  return access === 'write-prefix' ? level === 'write' : enforce(level, access) === 'allow';
}

/**
 * Whether any rule of these rules, at any level of blocks, could grant the check: a sieve for
 * candidates (never the decision, which explain() makes for each candidate).
 */
export function couldGrant(rules: ScopeRules, c: Pick<Check, 'resource' | 'segment' | 'access'>): boolean {
  if (scopeCouldGrant(rules, c)) return true;
  for (const b of rules.namespaces) if (couldGrant(b.rules, c)) return true;
  for (const b of rules.partitions) if (couldGrant(b.rules, c)) return true;
  return false;
}

function scopeCouldGrant(rules: ScopeRules, c: Pick<Check, 'resource' | 'segment' | 'access'>): boolean {
  switch (c.resource) {
    case 'acl':
      return levelAllows(rules.acl, c.access);
    case 'operator':
    case 'keyring':
      return levelAllows(rules.flags[c.resource], c.access);
    case 'mesh':
    case 'peering':
      return levelAllows(rules.flags[c.resource], c.access) || levelAllows(rules.flags.operator, c.access);
    default: {
      const base = c.resource === 'intention' ? 'service' : c.resource;
      const segment = c.segment ?? '';
      for (const r of rules.resources) {
        const kind = TABLE_OF.get(r.resource);
        if (kind === undefined || kind.base !== base) continue;
        const matches = kind.prefix
          ? segment.startsWith(r.segment) || (c.access === 'write-prefix' && r.segment.startsWith(segment))
          : r.segment === segment || (c.access === 'write-prefix' && r.segment.startsWith(segment));
        if (!matches) continue;
        const level =
          c.resource === 'intention' ? (r.intentions ?? (r.policy === 'read' || r.policy === 'write' ? 'read' : 'deny')) : r.policy;
        if (levelAllows(level, c.access)) return true;
      }
      return false;
    }
  }
}

/** What grants could grant the check, and so which tokens are candidates. */
interface Candidates {
  policies: Set<string>;
  roles: Set<string>;
  /** Service identity names (undefined: every one, its rules grant whatever the name). */
  services: Set<string> | undefined;
  nodes: Set<string> | undefined;
  templates: Set<string>;
  /** The default policy allows it: every token is a candidate. */
  everyone: boolean;
}

export class WhoCanService {
  constructor(
    private readonly store: { reader: StateReader; tableIndex(table: 'tokens' | 'policies' | 'roles'): number },
    private readonly resolver: AclResolver,
    private readonly clock: Clock,
    private readonly datacenter: string,
  ) {}

  private get reader(): StateReader {
    return this.store.reader;
  }

  async whoCan(ctx: RequestContext, q: WhoCanQuery): Promise<WhoCanAnswer> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'read');
    const canSee = readableBy(identity);
    const check = parseQuery(q);
    const limit = limitOf(q.limit);
    const cursor = cursorOf(q.cursor);
    const place = { partition: scope.Partition, namespace: scope.Namespace };
    const { candidates, ids } = this.found(check, identity.token.AccessorID);
    const out: WhoCanAnswer = {
      Resource: check.resource,
      ...(check.segment !== undefined ? { Segment: check.segment } : {}),
      Access: check.accessText,
      Namespace: place.namespace,
      Partition: place.partition,
      Tokens: [],
      Scanned: 0,
    };
    if (cursor === undefined) out.Roles = this.roles(check, place);
    const now = this.clock.now();
    let last: string | undefined;
    const judge = (token: TokenRecord): boolean => {
      out.Scanned++;
      last = token.AccessorID;
      if (token.Partition !== place.partition || token.Namespace !== place.namespace || isExpired(token, now) || !canSee(token))
        return false;
      if (!candidates.everyone && !isCandidate(token, candidates)) return false;
      const e = explain(
        this.resolver.compileOnce(token),
        check.resource,
        check.segment ?? '',
        check.access,
        place.partition,
        place.namespace,
      );
      if (e.allow) out.Tokens.push({ AccessorID: token.AccessorID, Description: token.Description, Local: token.Local, Reason: e.reason });
      return out.Tokens.length >= limit;
    };
    let more = false;
    if (ids === undefined) {
      // Grants everywhere: the namespace's tokens in order, from the cursor.
      for (const token of this.reader.tokensInScopeAfter(place.partition, place.namespace, cursor)) {
        if (out.Scanned >= SCAN_BUDGET || (judge(token) && (more = true))) break;
      }
      if (out.Scanned >= SCAN_BUDGET) more = true;
    } else {
      let i = lowerBound(ids, cursor);
      for (; i < ids.length; i++) {
        if (out.Scanned >= SCAN_BUDGET) break;
        const token = this.reader.peekToken(ids[i] as string);
        if (token !== undefined && judge(token)) {
          i++;
          break;
        }
      }
      more = i < ids.length;
    }
    if (more && last !== undefined) out.NextCursor = last;
    return out;
  }

  /**
   * The candidates of a check and their tokens, found once for all its pages and kept by check:
   * the candidates while no policy or role changed, their tokens while no token changed (a
   * token's write finds them again from the candidates kept). Finding anew costs the caller one
   * of its COLD_PER_MINUTE; the least recently used checks give way past KEPT_CHECKS or KEPT_IDS.
   */
  private found(c: Check, caller: string): { candidates: Candidates; ids: string[] | undefined } {
    const key = `${c.resource}\u0000${c.segment ?? '\u0001'}\u0000${c.access}`;
    const rules = `${this.store.tableIndex('policies')}/${this.store.tableIndex('roles')}`;
    const tokens = this.store.tableIndex('tokens');
    const kept = this.kept.get(key);
    if (kept !== undefined && kept.rules === rules && kept.tokens === tokens) {
      this.kept.delete(key);
      this.kept.set(key, kept);
      return kept;
    }
    const wait = this.cold.take(caller);
    if (wait > 0)
      throw new WatchwordError(
        'RATE_LIMITED',
        `Too many different who-can checks from this token: at most ${COLD_PER_MINUTE} a minute are looked up anew; retry in ${wait} s`,
        { retryAfter: wait },
      );
    const candidates = kept !== undefined && kept.rules === rules ? kept.candidates : this.candidates(c);
    const answer = { rules, tokens, candidates, ids: this.collect(candidates) };
    this.forget(key);
    this.kept.set(key, answer);
    this.keptIds += answer.ids?.length ?? 0;
    while (this.kept.size > KEPT_CHECKS || (this.keptIds > KEPT_IDS && this.kept.size > 1))
      this.forget(this.kept.keys().next().value as string);
    return answer;
  }

  private forget(key: string): void {
    const kept = this.kept.get(key);
    if (kept === undefined) return;
    this.kept.delete(key);
    this.keptIds -= kept.ids?.length ?? 0;
  }

  private readonly kept = new Map<string, { rules: string; tokens: number; candidates: Candidates; ids: string[] | undefined }>();
  private keptIds = 0;
  private readonly cold = new RateLimiter(COLD_PER_MINUTE / 60, COLD_PER_MINUTE);

  /** The grants whose rules could grant the check (each a small table, or names tried directly). */
  private candidates(c: Check): Candidates {
    const policies = new Set<string>();
    for (const p of this.reader.allPolicies()) if (couldGrant(this.resolver.rulesOf(p), c)) policies.add(p.ID);
    const rendered = (p: { ID: string; Rules: string }) => couldGrant(this.resolver.renderedRulesOf(p), c);
    const named = (names: string[], render: (name: string) => { ID: string; Rules: string }): Set<string> | undefined => {
      if (rendered(render(ANY_NAME))) return undefined;
      return new Set(names.filter((n) => n !== '' && rendered(render(n))));
    };
    const segment = c.segment ?? '';
    const bySidecar = segment.endsWith(SIDECAR) ? [segment.slice(0, -SIDECAR.length)] : [];
    const services = named([segment, ...bySidecar], (n) => serviceIdentityPolicy({ ServiceName: n }));
    const nodes = named([segment], (n) => nodeIdentityPolicy({ NodeName: n, Datacenter: this.datacenter }));
    const templates = new Set<string>();
    for (const name of this.reader.tokenKeysOf('template')) {
      const t = findTemplate(name);
      if (t === undefined) continue;
      const tried = t.needsName ? [ANY_NAME, segment, ...bySidecar] : [undefined];
      if (tried.some((n) => rendered({ ID: `who-can:${name}:${n ?? ''}`, Rules: renderTemplate(t, n) }))) templates.add(name);
    }
    const roles = new Set<string>();
    for (const r of this.reader.allRoles()) {
      if (r.Policies.some((l) => policies.has(l.ID))) roles.add(r.ID);
      else if (grantsByIdentity(r, services, nodes, templates)) roles.add(r.ID);
    }
    return { policies, roles, services, nodes, templates, everyone: this.resolver.defaultPolicy === 'allow' };
  }

  /**
   * The AccessorIDs of every candidate token, sorted; undefined when the candidates are most of
   * the store (grants everywhere, or more than COLLECT_MAX): the namespace is walked instead.
   */
  private collect(c: Candidates): string[] | undefined {
    if (c.everyone || c.services === undefined || c.nodes === undefined) return undefined;
    const sources: Array<[Parameters<StateReader['tokenIDsBy']>[0], string]> = [
      ...[...c.policies].map((id): ['policy', string] => ['policy', id]),
      ...[...c.roles].map((id): ['role', string] => ['role', id]),
      ...[...c.services].map((n): ['service', string] => ['service', n]),
      ...[...c.nodes].map((n): ['node', string] => ['node', n]),
      ...[...c.templates].map((n): ['template', string] => ['template', n]),
    ];
    let total = 0;
    for (const [index, key] of sources) total += this.reader.tokenCountBy(index, key);
    if (total > COLLECT_MAX) return undefined;
    const ids = new Set<string>();
    for (const [index, key] of sources) for (const id of this.reader.tokenIDsBy(index, key)) ids.add(id);
    return [...ids].sort();
  }

  /** Every role of the place that grants the check by itself, judged as a token holding only it. */
  private roles(c: Check, place: { partition: string; namespace: string }): WhoCanAnswer['Roles'] {
    const out: NonNullable<WhoCanAnswer['Roles']> = [];
    for (const r of this.reader.allRoles()) {
      if (r.Partition !== place.partition || r.Namespace !== place.namespace) continue;
      const e = explain(this.resolver.compileOnce(roleAsToken(r)), c.resource, c.segment ?? '', c.access, place.partition, place.namespace);
      if (e.allow) out.push({ ID: r.ID, Name: r.Name, Reason: e.reason });
    }
    return out.sort((a, b) => (a.Name < b.Name ? -1 : a.Name > b.Name ? 1 : 0));
  }
}

function grantsByIdentity(
  g: Pick<TokenRecord, 'ServiceIdentities' | 'NodeIdentities' | 'TemplatedPolicies'>,
  services: Set<string> | undefined,
  nodes: Set<string> | undefined,
  templates: Set<string>,
): boolean {
  if (g.ServiceIdentities.length > 0 && (services === undefined || g.ServiceIdentities.some((s) => services.has(s.ServiceName))))
    return true;
  if (g.NodeIdentities.length > 0 && (nodes === undefined || g.NodeIdentities.some((n) => nodes.has(n.NodeName)))) return true;
  return g.TemplatedPolicies.some((t) => templates.has(t.TemplateName));
}

/** Whether a token holds a grant that could grant the check (else it cannot be granted but by the default policy). */
function isCandidate(token: TokenRecord, c: Candidates): boolean {
  if (token.Policies.some((l) => c.policies.has(l.ID))) return true;
  if (token.Roles.some((l) => c.roles.has(l.ID))) return true;
  return grantsByIdentity(token, c.services, c.nodes, c.templates);
}

/** A role judged as a token holding only that role, in the role's place. */
const roleAsToken = (r: RoleRecord): TokenRecord => tokenHolding(`role:${r.ID}`, r, { Roles: [{ ID: r.ID }] });

/** The first index whose ID sorts after `after`. */
function lowerBound(ids: readonly string[], after: string | undefined): number {
  if (after === undefined) return 0;
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((ids[mid] as string) <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The check the query names, checked as a decision's would be (the same messages, without the element). */
function parseQuery(q: WhoCanQuery): Check {
  try {
    const [check] = parseChecks([
      {
        Resource: q.resource ?? '',
        ...(q.segment !== undefined ? { Segment: q.segment } : {}),
        Access: q.access ?? '',
      },
    ]);
    return check as Check;
  } catch (err) {
    throw invalid(
      (err as Error).message
        .replace(/^checks\[0\]: /, '')
        .replace(/^Resource/, 'resource')
        .replace(/^Access/, 'access'),
    );
  }
}

function limitOf(text: string | undefined): number {
  if (text === undefined || text === '') return DEFAULT_LIMIT;
  if (!/^\d{1,6}$/.test(text) || Number(text) < 1) throw invalid(`Invalid limit: expected a whole number from 1 to ${MAX_LIMIT}`);
  return Math.min(Number(text), MAX_LIMIT);
}

function cursorOf(text: string | undefined): string | undefined {
  if (text === undefined || text === '') return undefined;
  if (text.length > 128 || !/^[0-9A-Za-z-]+$/.test(text)) throw invalid('Invalid cursor: expected the NextCursor of an earlier answer');
  return text;
}
