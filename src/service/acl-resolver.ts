import type { Clock } from '../domain/clock.js';
import { WatchwordError, aclNotFound } from '../domain/errors.js';
import { formatDuration } from '../domain/duration.js';
import { isExpired } from '../domain/expiry.js';
import { isBuiltinPolicyID } from '../domain/builtins.js';
import { ANONYMOUS_TOKEN_ID, ANONYMOUS_TOKEN_SECRET, GLOBAL_MANAGEMENT_POLICY_ID } from '../domain/ids.js';
import { type ApplicablePolicy, Authorizer, type DefaultPolicy } from '../domain/rules/authorizer.js';
import { parsePolicyRules, type ScopeRules } from '../domain/rules/policy.js';
import { type SyntheticPolicy, renderedSources } from '../domain/templates.js';
import type { DecisionSource } from '../domain/rules/explain-types.js';
import type { PolicyRecord, RoleRecord, TokenRecord } from '../domain/types.js';
import type { ChangedRecords, Store } from '../store/store.js';
import type { UnknownSecretBudget } from './unknown-secrets.js';

/** Who is making a request: the token and what it may do. */
export interface Identity {
  token: TokenRecord;
  /** True when no secret was sent and the anonymous token stands in. */
  anonymous: boolean;
  /** The secret the request carried ('' for anonymous), to protect the caller's own token. */
  secret: string;
  authorizer: Authorizer;
  /**
   * When the secret presented is one a rotation replaced: the time (ms) it stops authenticating,
   * the end of the rotation's overlap (docs/operator-insight.md). Absent for the token's current secret.
   */
  secretEnds?: number;
  /**
   * Set while this secondary cannot confirm global state (replication_max_stale): the anonymous
   * token then stands with no policies, judged by the default policy alone, since what the
   * primary granted it may have been taken back.
   */
  unconfirmed?: true;
}

/** A policy that applies to a token, as an enforcing client receives it. */
export interface ApplicablePolicyText {
  ID: string;
  Rules: string;
  /** Where the policy lives (rendered identities: where the token lives). */
  Namespace: string;
  Partition: string;
  /** A built-in policy (its rules apply in every namespace for default-namespace tokens). */
  Builtin: boolean;
}

/** Everything reachable from a token: live policies, live roles, rendered identities. */
export interface ReachablePolicies {
  policies: PolicyRecord[];
  roles: RoleRecord[];
  synthetic: SyntheticPolicy[];
  /** Where each policy and rendered policy came from, by ID (the first way it is reached: the subject's own links before a role's). */
  sources: Map<string, DecisionSource>;
}

const RULE_CACHE_LIMIT = 10_000;
const AUTHORIZER_CACHE_LIMIT = 100_000;

/** A compiled authorizer, valid while its token object and the policy and role tables are unchanged. */
interface CachedAuthorizer {
  token: TokenRecord;
  policiesIndex: number;
  rolesIndex: number;
  authorizer: Authorizer;
  /** The identities built on it: for the token's own secret, its replaced one in a rotation's overlap, and standing in for no secret. */
  bySecret?: Identity;
  byPreviousSecret?: Identity;
  asAnonymous?: Identity;
  /** The anonymous token while stale: no policies, the default policy decides. */
  staleAnonymous?: Identity;
}

export interface ResolverOptions {
  datacenter: string;
  defaultPolicy: DefaultPolicy;
  /**
   * Secondaries: asked about a secret the local replica does not hold. Resolves true
   * when the primary knows it and it has now replicated here.
   */
  lookupUnknownSecret?: (secret: string, client: string | undefined) => Promise<boolean>;
  /**
   * Secondaries with replication_max_stale: global tokens are refused while the primary has
   * been silent for longer than `maxMs` (they may have been revoked there); Local tokens are not.
   */
  staleness?: { maxMs: number; silentForMs(): number | undefined };
  /** Told when a stored record cannot be judged as written (an unknown templated policy): it grants nothing. */
  onProblem?: (message: string) => void;
  /** Told of each request a token's secret authenticated (its last use: store/last-use.ts). Cheap: on every request. */
  recordUse?: (accessor: string, ms: number) => void;
  /** The budget of secrets no token holds, per client (unknown-secrets.ts): past it a guess is 429, not 403. */
  unknownSecrets?: UnknownSecretBudget;
}

/**
 * Turns a request's secret into an Identity. A missing secret means the anonymous
 * token; an unknown or expired one is "ACL not found", never anonymous.
 */
export class AclResolver {
  /** Parsed rules keyed by content hash: the same text is parsed once. */
  private readonly ruleCache = new Map<string, ScopeRules>();
  /**
   * Compiled authorizers by AccessorID. Records are replaced, never mutated, so an
   * entry is current while the token object is the same and no policy or role changed
   * (their table indexes move with every durable change).
   */
  private readonly authorizers = new Map<string, CachedAuthorizer>();

  constructor(
    private readonly store: Pick<Store, 'reader' | 'tableIndex'>,
    private readonly clock: Clock,
    private readonly options: ResolverOptions,
  ) {}

  private get reader() {
    return this.store.reader;
  }

  /**
   * `client` is the caller's address: look-ups of unknown secrets are limited per client.
   * Synchronous unless this secondary must ask the primary about a secret it lacks.
   */
  resolve(secret: string | undefined, client?: string): Identity | Promise<Identity> {
    if (secret !== undefined && secret !== '' && this.options.lookupUnknownSecret && !this.knows(secret)) {
      const lookup = this.options.lookupUnknownSecret;
      // A token created a moment ago on the primary may not have replicated yet.
      return lookup(secret, client).then(() => this.resolveGated(secret, client));
    }
    return this.resolveGated(secret, client);
  }

  /** The identity from this datacenter's state; a secret no token holds is spent from the client's budget of guesses. */
  private resolveGated(secret: string | undefined, client: string | undefined): Identity {
    try {
      return this.resolveLocal(secret);
    } catch (err) {
      if (secret !== undefined && secret !== '' && this.options.unknownSecrets && !this.knows(secret))
        this.options.unknownSecrets.spend(client);
      throw err;
    }
  }

  /** A secret no token holds, presented at another door (a watch entry): spent from the same budget; false once it is spent. */
  guessed(client: string): boolean {
    return this.options.unknownSecrets?.trySpend(client) ?? true;
  }

  /**
   * Whether a token holds this secret (current, expired, or replaced by a rotation) or held it a
   * moment ago (deleted here): not a guess.
   */
  knows(secret: string): boolean {
    return (
      this.reader.getTokenBySecret(secret) !== undefined ||
      this.reader.getTokenByPreviousSecret(secret) !== undefined ||
      this.reader.isSecretGone(secret)
    );
  }

  /** Whether global tokens cannot be confirmed now (this secondary has not heard from the primary for replication_max_stale). */
  stale(): boolean {
    return this.options.staleness !== undefined && isStale(this.options.staleness);
  }

  /** The identity from this datacenter's state alone (no look-up elsewhere). */
  resolveLocal(secret: string | undefined): Identity {
    const anonymous = secret === undefined || secret === '';
    const now = this.clock.now();
    let token = anonymous ? this.reader.getToken(ANONYMOUS_TOKEN_ID) : this.reader.getTokenBySecret(secret);
    let secretEnds: number | undefined;
    if (token === undefined && !anonymous) {
      // A secret a rotation replaced authenticates until its overlap ends, then nowhere.
      const rotated = this.reader.getTokenByPreviousSecret(secret);
      const ends = rotated?.PreviousSecretExpirationTime === undefined ? Number.NaN : Date.parse(rotated.PreviousSecretExpirationTime);
      if (rotated !== undefined && now < ends) {
        token = rotated;
        secretEnds = ends;
      }
    }
    if (token === undefined || isExpired(token, now)) {
      if (anonymous) {
        // Not yet created (a secondary before its first sync): an anonymous token with nothing attached.
        throw new WatchwordError('ACL_NOT_FOUND', 'ACL not found: the anonymous token does not exist yet');
      }
      throw aclNotFound();
    }
    if (!anonymous) this.options.recordUse?.(token.AccessorID, now);
    const staleness = this.options.staleness;
    const isAnonymousToken = token.AccessorID === ANONYMOUS_TOKEN_ID;
    if (staleness !== undefined && !token.Local && isStale(staleness)) {
      if (!isAnonymousToken) refuseWhenStale(staleness);
      // Refusing the anonymous token would refuse every caller that sends none; its granted rights are what cannot be confirmed.
      const entry = this.compiled(token);
      return (entry.staleAnonymous ??= {
        token,
        anonymous: true,
        secret: anonymous ? '' : token.SecretID,
        authorizer: new Authorizer(token.Namespace, token.Partition, [], this.options.defaultPolicy),
        unconfirmed: true,
      });
    }
    // Identities are shared by every request of the same token until it or its policies change.
    const entry = this.compiled(token);
    if (anonymous) {
      return (entry.asAnonymous ??= { token, anonymous: true, secret: '', authorizer: entry.authorizer });
    }
    if (secretEnds !== undefined) {
      return (entry.byPreviousSecret ??= { token, anonymous: false, secret: secret as string, authorizer: entry.authorizer, secretEnds });
    }
    return (entry.bySecret ??= {
      token,
      anonymous: token.SecretID === ANONYMOUS_TOKEN_SECRET,
      secret: token.SecretID,
      authorizer: entry.authorizer,
    });
  }

  /** Policies and roles reachable from a token or role's links, dangling links dropped. */
  reachable(
    subject: Pick<TokenRecord, 'Policies' | 'ServiceIdentities' | 'NodeIdentities' | 'TemplatedPolicies'> & {
      Roles?: TokenRecord['Roles'];
    },
  ): ReachablePolicies {
    const roles = this.reader.getRecords(
      'roles',
      (subject.Roles ?? []).map((l) => l.ID),
    );
    const policyIDs = new Set(subject.Policies.map((l) => l.ID));
    for (const r of roles) for (const l of r.Policies) policyIDs.add(l.ID);
    const policies = this.reader.getRecords('policies', [...policyIDs]);
    const sources = new Map<string, DecisionSource>();
    const synthetic = new Map<string, SyntheticPolicy>();
    for (const p of policies) sources.set(p.ID, policySource(p));
    for (const { policy, source } of renderedSources(subject)) {
      synthetic.set(policy.ID, policy);
      if (!sources.has(policy.ID)) sources.set(policy.ID, source);
    }
    const direct = new Set(subject.Policies.map((l) => l.ID));
    const byID = new Map(policies.map((p) => [p.ID, p]));
    for (const r of roles) {
      const role = { Source: 'role' as const, ID: r.ID, Name: r.Name };
      for (const l of r.Policies) {
        const p = byID.get(l.ID);
        if (p && !direct.has(p.ID) && sources.get(p.ID)?.Source !== 'role')
          sources.set(p.ID, { ...role, Policy: { ID: p.ID, Name: p.Name } });
      }
      for (const { policy, source } of renderedSources(r)) {
        synthetic.set(policy.ID, policy);
        if (!sources.has(policy.ID)) sources.set(policy.ID, { ...role, Identity: `${source.Source} ${JSON.stringify(source.Name)}` });
      }
    }
    return { policies, roles, synthetic: [...synthetic.values()], sources };
  }

  private validHere(dcs: readonly string[] | undefined): boolean {
    return dcs === undefined || dcs.length === 0 || dcs.includes(this.options.datacenter);
  }

  /**
   * A policy's parsed rules, kept with the record itself (records are replaced, never changed,
   * on every write): never keyed by a stored hash, which a restored file could forge.
   */
  private policyRules(p: PolicyRecord): ScopeRules {
    let rules = this.policyRuleCache.get(p);
    if (rules === undefined) this.policyRuleCache.set(p, (rules = parseOrNothing(p.Rules)));
    return rules;
  }

  private readonly policyRuleCache = new WeakMap<PolicyRecord, ScopeRules>();

  private renderedRules(cacheKey: string, text: string): ScopeRules {
    let rules = this.ruleCache.get(cacheKey);
    if (rules === undefined) {
      rules = parseOrNothing(text);
      if (this.ruleCache.size >= RULE_CACHE_LIMIT) this.ruleCache.delete(this.ruleCache.keys().next().value as string);
      this.ruleCache.set(cacheKey, rules);
    }
    return rules;
  }

  /**
   * An authorizer compiled for this one question and not kept (who can, dry runs: walks of many
   * tokens must not push the tokens in use out of the cache).
   */
  compileOnce(token: TokenRecord): Authorizer {
    return this.compile(token);
  }

  /** The parsed rules of a stored policy (parsed once per record). */
  rulesOf(policy: PolicyRecord): ScopeRules {
    return this.policyRules(policy);
  }

  /** The parsed rules of a rendered policy (an identity's, a template's), parsed once per text. */
  renderedRulesOf(p: { ID: string; Rules: string }): ScopeRules {
    return this.renderedRules(`s:${p.ID}`, p.Rules);
  }

  /**
   * Drops what a commit made stale: the authorizers of tokens it wrote or deleted (an expired
   * token reaped, a login logged out), and every one when a policy or role changed or the whole
   * store was replaced (`changed` absent). Without this a token's authorizer outlived the token
   * until the cache filled: RSS grew with every login that came and went.
   */
  forgetChanged(changed: ChangedRecords | undefined): void {
    if (this.authorizers.size === 0) return;
    if (changed === undefined || changed.policies.length > 0 || changed.roles.length > 0) {
      this.authorizers.clear();
      return;
    }
    for (const id of changed.tokens) this.authorizers.delete(id);
  }

  /** Compiled authorizers held (the metrics' gauge). */
  get cachedAuthorizers(): number {
    return this.authorizers.size;
  }

  /** The token's authorizer, compiled once and reused until the token, a policy or a role changes. */
  authorizerFor(token: TokenRecord): Authorizer {
    return this.compiled(token).authorizer;
  }

  private compiled(token: TokenRecord): CachedAuthorizer {
    const policiesIndex = this.store.tableIndex('policies');
    const rolesIndex = this.store.tableIndex('roles');
    const cached = this.authorizers.get(token.AccessorID);
    if (cached && cached.token === token && cached.policiesIndex === policiesIndex && cached.rolesIndex === rolesIndex) return cached;
    const entry: CachedAuthorizer = { token, policiesIndex, rolesIndex, authorizer: this.compile(token) };
    if (this.authorizers.size >= AUTHORIZER_CACHE_LIMIT) this.authorizers.clear();
    this.authorizers.set(token.AccessorID, entry);
    return entry;
  }

  private compile(token: TokenRecord): Authorizer {
    const applicable: ApplicablePolicy[] = this.applicablePolicies(token).map((p) => ({
      rules: p.record ? this.policyRules(p.record) : this.renderedRules(`s:${p.ID}`, p.Rules),
      namespace: p.Namespace,
      partition: p.Partition,
      builtin: p.Builtin,
      ...(p.source ? { source: p.source } : {}),
    }));
    return new Authorizer(token.Namespace, token.Partition, applicable, this.options.defaultPolicy);
  }

  /**
   * The policies that judge a token in this datacenter, as text: stored ones whose
   * Datacenters allow here, and the rendered identities and templates (which act in the
   * token's own namespace). What the authorizer is compiled from, here or in an enforcing client.
   */
  applicablePolicies(token: TokenRecord): Array<ApplicablePolicyText & { record?: PolicyRecord; source?: DecisionSource }> {
    const { policies, synthetic, sources } = this.reachable(token);
    const out: Array<ApplicablePolicyText & { record?: PolicyRecord; source?: DecisionSource }> = [];
    for (const p of policies) {
      if (this.validHere(p.Datacenters))
        out.push({
          ID: p.ID,
          Rules: p.Rules,
          Namespace: p.Namespace,
          Partition: p.Partition,
          Builtin: isBuiltinPolicyID(p.ID),
          record: p,
          source: sources.get(p.ID) as DecisionSource,
        });
    }
    for (const s of synthetic) {
      if (s.Problem !== undefined) this.problem(`token ${token.AccessorID}: ${s.Problem}`);
      if (this.validHere(s.Datacenters))
        out.push({
          ID: s.ID,
          Rules: s.Rules,
          Namespace: token.Namespace,
          Partition: token.Partition,
          Builtin: false,
          source: sources.get(s.ID) as DecisionSource,
        });
    }
    return out;
  }

  /** Problems already told (each once per process, at most 1,000 kept: a record judged per request must not flood the log). */
  private readonly told = new Set<string>();

  private problem(message: string): void {
    if (this.told.has(message)) return;
    if (this.told.size >= 1_000) this.told.clear();
    this.told.add(message);
    this.options.onProblem?.(message);
  }

  /** The default policy that decides what no rule does. */
  get defaultPolicy(): DefaultPolicy {
    return this.options.defaultPolicy;
  }
}

/** A stored policy as an explanation names it (global-management by its own kind). */
function policySource(p: PolicyRecord): DecisionSource {
  return { Source: p.ID === GLOBAL_MANAGEMENT_POLICY_ID ? 'global-management' : 'policy', ID: p.ID, Name: p.Name };
}

/** Parsed rules; stored rules were validated on write, and if they no longer parse they grant nothing. */
function parseOrNothing(text: string): ScopeRules {
  try {
    return parsePolicyRules(text);
  } catch {
    return { flags: {}, resources: [], namespaces: [], partitions: [] };
  }
}

function isStale(staleness: NonNullable<ResolverOptions['staleness']>): boolean {
  const silent = staleness.silentForMs();
  return silent !== undefined && silent > staleness.maxMs;
}

/** A global token cannot be confirmed while the primary has been silent past the bound. */
function refuseWhenStale(staleness: NonNullable<ResolverOptions['staleness']>): void {
  const silent = staleness.silentForMs() ?? 0;
  throw new WatchwordError(
    'PERMISSION_DENIED',
    `Permission denied: this datacenter has not heard from the primary for ${formatDuration(silent)}, longer than replication_max_stale ` +
      `(${formatDuration(staleness.maxMs)}); global tokens cannot be confirmed until it has (Local tokens still work)`,
  );
}
