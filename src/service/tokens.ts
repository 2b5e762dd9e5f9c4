import type { GrantLimit } from './grant-limit.js';
import { TOKEN_FIELDS, contentOf, givenFields, laterForms } from '../domain/records.js';
import type { TokenListFilter } from '../api/token-list-filter.js';
import { audited } from './audited.js';
import type { Clock } from '../domain/clock.js';
import { formatDuration, parseDuration } from '../domain/duration.js';
import { conflict, invalid, missingTarget, notFound, notPermitted } from '../domain/errors.js';
import { type ExpiryLimits, isExpired, resolveExpiration } from '../domain/expiry.js';
import { admitToken } from './quotas.js';
import { normalizeNodeIdentities, normalizeServiceIdentities, normalizeTemplatedPolicies } from '../domain/grants.js';
import { tokenHash } from '../domain/hash.js';
import { type TokenContent, newTokenRecord } from '../domain/token.js';
import { ANONYMOUS_TOKEN_ID, RESERVED_PREFIX, filterID, isReservedID, isUUID } from '../domain/ids.js';
import type { Scope, TokenRecord } from '../domain/types.js';
import type { StateReader, Store, TokenQuery } from '../store/store.js';
import type { AclResolver, Identity } from './acl-resolver.js';
import type { AgentInfo, RequestContext, WriteResult } from './context.js';
import { namedLinks, resolveLinks } from './links.js';
import { authorize, authorizeList } from './permissions.js';
import { freshID, tokenIDTaken } from './uniqueness.js';
import { WILDCARD } from './scope.js';
import type { z } from 'zod';
import type { ExpandedTokenResponse, cloneBody, rotateBody, tokenBody } from '../api/schemas.js';
import { type JSONStream, JSONText, type TokenView, policyView, roleView, tokenView } from './views.js';
import type { Page } from './paging.js';
import { tokenListAnswer } from './token-list.js';
import { lastUsedTime } from '../store/last-use.js';

/** Token as a client sends it, decoded by its schema (the schema is the one definition). */
export type TokenInput = z.output<typeof tokenBody>;

/** Clone as a client sends it, decoded by its schema (the schema is the one definition). */
export type CloneInput = z.output<typeof cloneBody>;
export type RotateInput = z.output<typeof rotateBody>;

/** The longest a rotation's replaced secret may keep authenticating. */
export const MAX_ROTATION_OVERLAP_MS = 24 * 3600_000;

/** The list's filters as a request gives them (api/token-list-filter.ts declares them for both ends). */
export type TokenListQuery = TokenListFilter;

/** The expanded read: the token plus everything that shapes its permissions. */
export type ExpandedTokenView = ExpandedTokenResponse;

export interface TokenServiceOptions {
  limits: ExpiryLimits;
  /**
   * IDs a client chose for a new token, checked beyond this datacenter (throws CONFLICT
   * when taken), so a Local token and a global one never share an ID or a secret: a
   * secondary asks the primary about a new Local token's IDs, the primary asks the
   * connected secondaries about a new global token's. Best effort: a datacenter that
   * cannot be asked in time is skipped.
   */
  checkChosenIDs?: (ids: { accessor?: string; secret?: string }, local: boolean) => Promise<void>;
  /** Features that need every server (FEATURE_NOT_ENABLED until the upgrade is finalized with them). */
  features?: { require(name: string): void };
  /** acl_grant_limit: what a caller may grant (grant-limit.ts); unset, anything (Consul's behaviour). */
  grants?: Pick<GrantLimit, 'token'>;
}

/** A token version's serialised views, valid while the policy and role tables stand at these indexes. */
interface SerializedViews {
  policies: number;
  roles: number;
  shown?: JSONText;
  hidden?: JSONText;
  /** The expanded read's, for the agent it was made for. */
  expanded?: { agent: AgentInfo; shown?: JSONText; hidden?: JSONText };
}

/** A view's text with a last use, made once a minute per view (the last use changes without a new record version). */
const withUses = new WeakMap<JSONText, { minute: number; text: JSONText }>();

function withLastUse(text: JSONText, ms: number | undefined): JSONText {
  if (ms === undefined) return text;
  const minute = Math.floor(ms / 60_000);
  const done = withUses.get(text);
  if (done?.minute === minute) return done.text;
  const out = text.withMember('LastUsedTime', JSON.stringify(lastUsedTime(ms)));
  withUses.set(text, { minute, text: out });
  return out;
}

const notFoundToken = (id: string) => notFound(`Cannot find token ${JSON.stringify(id)}`);
const missingToken = (id: string) => missingTarget(`Cannot find token ${JSON.stringify(id)}`);

export class TokenService {
  /** Serialised views by record (see viewText). */
  private readonly serialized = new WeakMap<TokenRecord, SerializedViews>();

  constructor(
    private readonly store: Store,
    private readonly resolver: AclResolver,
    private readonly clock: Clock,
    private readonly options: TokenServiceOptions,
  ) {}

  private get reader(): StateReader {
    return this.store.reader;
  }

  /** A field of a later record form is written only once the cluster carries that form everywhere (FEATURE_NOT_ENABLED till then). */
  private requireForms(input: object): void {
    for (const form of laterForms(TOKEN_FIELDS, input)) this.options.features?.require(`record-form-${form}`);
  }

  /** The response view: names resolved now, secret shown only to acl:write in the token's scope. */
  view(token: TokenRecord, showSecret: boolean): TokenView {
    return tokenView(
      token,
      { policies: namedLinks(this.reader, 'policy', token.Policies), roles: namedLinks(this.reader, 'role', token.Roles) },
      showSecret,
    );
  }

  /** A view with the token's last use, when one is known (docs/http-api.md, "Last use"). */
  withUse(view: TokenView): TokenView {
    const ms = this.store.lastUse.get(view.AccessorID);
    return ms === undefined ? view : { ...view, LastUsedTime: lastUsedTime(ms) };
  }

  private canSeeSecret(identity: Identity, token: TokenRecord): boolean {
    return identity.authorizer.canWrite(token.Partition, token.Namespace);
  }

  /** IDs a client chose for a new token, checked in the other datacenters (see TokenServiceOptions). */
  async checkChosenIDs(ids: { accessor?: string; secret?: string }, local: boolean): Promise<void> {
    if ((ids.accessor || ids.secret) && this.options.checkChosenIDs) await this.options.checkChosenIDs(ids, local);
  }

  /** A live token in the given scope, or undefined (expired counts as gone). */
  private live(token: TokenRecord | undefined, scope: Scope): TokenRecord | undefined {
    if (token === undefined || isExpired(token, this.clock.now())) return undefined;
    if (token.Namespace !== scope.Namespace || token.Partition !== scope.Partition) return undefined;
    return token;
  }

  /**
   * The view as JSON text, serialised once per token version: records are replaced on
   * every change, and link names can only change with the policy or role table index.
   */
  viewText(
    token: TokenRecord,
    showSecret: boolean,
    policies = this.store.tableIndex('policies'),
    roles = this.store.tableIndex('roles'),
  ): JSONText {
    const cached = this.views(token, policies, roles);
    const text = showSecret
      ? (cached.shown ??= new JSONText(JSON.stringify(this.view(token, true))))
      : (cached.hidden ??= new JSONText(JSON.stringify(this.view(token, false))));
    return withLastUse(text, this.store.lastUse.get(token.AccessorID));
  }

  /**
   * A listed token's view: the cached one when there is one, else made and not kept. A list walks
   * records decoded for a moment (the tokens in use stay decoded and cached): an entry for each of
   * a page's thousand would only be work for the collector.
   */
  private listedText(token: TokenRecord, showSecret: boolean, policies: number, roles: number): JSONText {
    const cached = this.serialized.get(token);
    const kept = cached?.policies === policies && cached.roles === roles ? (showSecret ? cached.shown : cached.hidden) : undefined;
    if (kept !== undefined) return withLastUse(kept, this.store.lastUse.get(token.AccessorID));
    return JSONText.passing(JSON.stringify(this.withUse(this.view(token, showSecret))));
  }

  /** The cache entry of a token version's serialised views, current for the policy and role tables. */
  private views(token: TokenRecord, policies = this.store.tableIndex('policies'), roles = this.store.tableIndex('roles')): SerializedViews {
    let cached = this.serialized.get(token);
    if (!cached || cached.policies !== policies || cached.roles !== roles) {
      cached = { policies, roles };
      this.serialized.set(token, cached);
    }
    return cached;
  }

  private async readable(ctx: RequestContext, accessorID: string): Promise<{ identity: Identity; token: TokenRecord }> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'read');
    const token = isUUID(accessorID) ? this.live(this.reader.getToken(accessorID), scope) : undefined;
    if (!token) throw notFoundToken(accessorID);
    return { identity, token };
  }

  async read(ctx: RequestContext, accessorID: string): Promise<JSONText> {
    const { identity, token } = await this.readable(ctx, accessorID);
    return this.viewText(token, this.canSeeSecret(identity, token));
  }

  /** The expanded read as JSON text, serialised once per token version (and policy and role table index). */
  async readExpanded(ctx: RequestContext, accessorID: string, agent: AgentInfo): Promise<JSONText> {
    const { identity, token } = await this.readable(ctx, accessorID);
    const showSecret = this.canSeeSecret(identity, token);
    const cached = this.views(token);
    if (cached.expanded?.agent !== agent) cached.expanded = { agent };
    const expanded = cached.expanded;
    const text = showSecret
      ? (expanded.shown ??= new JSONText(JSON.stringify(this.expandedView(token, true, agent))))
      : (expanded.hidden ??= new JSONText(JSON.stringify(this.expandedView(token, false, agent))));
    return withLastUse(text, this.store.lastUse.get(token.AccessorID));
  }

  private expandedView(token: TokenRecord, showSecret: boolean, agent: AgentInfo): ExpandedTokenView {
    const view = this.view(token, showSecret);
    const { policies, roles, synthetic } = this.resolver.reachable(token);
    const expandedRoles = roles.map((r) => roleView(r, namedLinks(this.reader, 'policy', r.Policies)));
    return {
      ...view,
      ExpandedPolicies: [...policies.map((p) => policyView(p)), ...synthetic.map(({ Problem: _, ...p }) => p)],
      ExpandedRoles: expandedRoles,
      NamespaceDefaultPolicyIDs: null,
      NamespaceDefaultRoleIDs: null,
      AgentACLDefaultPolicy: agent.defaultPolicy,
      AgentACLDownPolicy: agent.downPolicy,
      ResolvedByAgent: agent.nodeName,
    };
  }

  async readSelf(ctx: RequestContext): Promise<JSONText> {
    // No token is not "the anonymous token" here: a client with an empty configuration
    // must not believe it is signed in (Consul answers the same).
    if (ctx.secret === undefined || ctx.secret === '') throw notFound('Supplied token does not exist');
    const identity = await this.resolver.resolve(ctx.secret, ctx.client);
    // A secret a rotation replaced never reads the new one (it may be the leaked one the rotation is for).
    return this.viewText(identity.token, identity.secretEnds === undefined);
  }

  /** The token list, whole or (`page`) a page of it (token-list.ts), each token from its serialised view. */
  async list(ctx: RequestContext, q: TokenListQuery, page?: Page): Promise<JSONText | JSONStream> {
    const { identity, scope, namespaces, canSee } = await authorizeList(this.resolver, ctx, (p) => this.reader.namespacesOf('tokens', p));
    const filters = [q.policy, q.role, q.servicename, q.authmethod].filter((f) => f !== undefined && f !== '');
    const policy = filterID('policy', q.policy);
    const role = filterID('role', q.role);
    if (filters.length > 1) throw invalid('Only one of the policy, role, servicename and authmethod filters may be given at a time');
    let authMethodNamespace: string | undefined;
    if (q.authmethod) authMethodNamespace = q.authmethodNamespace || (scope.Namespace === WILDCARD ? undefined : scope.Namespace);
    if (namespaces.length === 0) return new JSONText('[]');
    const now = this.clock.now();
    const cutoff = q.unusedSince === undefined ? undefined : now - unusedFor(q.unusedSince);
    const uses = this.store.lastUse;
    const query: TokenQuery = {
      partition: scope.Partition,
      namespaces,
      ...(policy ? { policy } : {}),
      ...(role ? { role } : {}),
      ...(q.servicename ? { serviceName: q.servicename } : {}),
      ...(q.authmethod ? { authMethod: q.authmethod } : {}),
      ...(authMethodNamespace !== undefined ? { authMethodNamespace } : {}),
      ...(cutoff !== undefined ? { createdBefore: cutoff } : {}),
    };
    const policiesIndex = this.store.tableIndex('policies');
    const rolesIndex = this.store.tableIndex('roles');
    // Whether secrets show is decided per place; a list's tokens almost always share one.
    let partition: string | undefined;
    let namespace: string | undefined;
    let showSecret = false;
    const secretShown = (t: TokenRecord): boolean => {
      if (t.Partition !== partition || t.Namespace !== namespace) {
        partition = t.Partition;
        namespace = t.Namespace;
        showSecret = this.canSeeSecret(identity, t);
      }
      return showSecret;
    };
    return tokenListAnswer(this.reader, query, page, this.store.currentIndex(), {
      shown: (t) => !isExpired(t, now) && canSee(t) && !(cutoff !== undefined && (uses.get(t.AccessorID) ?? 0) >= cutoff),
      view: (t) => this.viewText(t, secretShown(t), policiesIndex, rolesIndex),
      viewOnce: (t) => this.listedText(t, secretShown(t), policiesIndex, rolesIndex),
    });
  }

  async create(ctx: RequestContext, input: TokenInput): Promise<WriteResult<TokenView>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    this.requireForms(input);
    const now = this.clock.now();
    const accessorID = input.AccessorID || undefined;
    const secretID = input.SecretID || undefined;
    checkNewID('AccessorID', accessorID);
    checkNewID('SecretID', secretID);
    if (accessorID !== undefined && accessorID === secretID) throw invalid('Invalid Token: AccessorID and SecretID must differ');
    if (input.AuthMethod || input.AuthMethodNamespace) throw invalid('AuthMethod field is disallowed outside of login');
    const expires = resolveExpiration(
      {
        ...(input.ExpirationTTL !== undefined ? { ttl: input.ExpirationTTL } : {}),
        ...(input.ExpirationTime !== undefined ? { time: input.ExpirationTime } : {}),
      },
      now,
      this.options.limits,
    );
    const local = input.Local ?? false;
    const grants = normalizeGrants(input, local);
    await this.checkChosenIDs({ ...(accessorID ? { accessor: accessorID } : {}), ...(secretID ? { secret: secretID } : {}) }, local);
    const { token, links } = await this.store.transact(
      (tx) => {
        const taken = tokenIDTaken(tx);
        if (accessorID !== undefined && taken(accessorID)) throw conflict('Invalid Token: AccessorID is already in use');
        if (secretID !== undefined && taken(secretID)) throw conflict('Invalid Token: SecretID is already in use');
        const accessor = accessorID ?? freshID(taken);
        const secret = secretID ?? freshID(taken);
        const ends = admitToken(tx, { ...scope, Local: local }, expires, now, 'create');
        const policies = resolveLinks(tx, 'policy', input.Policies, scope);
        const roles = resolveLinks(tx, 'role', input.Roles, scope);
        const content: TokenContent = {
          Description: input.Description ?? '',
          Policies: policies.ids,
          Roles: roles.ids,
          ...grants,
          Local: local,
        };
        const record = tx.put(
          'tokens',
          newTokenRecord({
            AccessorID: accessor,
            SecretID: secret,
            content,
            given: givenFields(TOKEN_FIELDS, input),
            ...(ends !== undefined ? { expires: ends } : {}),
            now,
            scope,
          }),
        );
        this.options.grants?.token(identity, record, tx);
        return { token: record, links: { policies: policies.named, roles: roles.named } };
      },
      audited(ctx, identity, 'token-create'),
    );
    // newTokenRecord hashed this content a moment ago.
    return { value: tokenView(token, links, true, token.Hash), index: token.ModifyIndex };
  }

  async update(ctx: RequestContext, accessorID: string, input: TokenInput): Promise<WriteResult<TokenView>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    this.requireForms(input);
    if (input.AccessorID && input.AccessorID !== accessorID) throw invalid('Token Accessor ID in URL and payload do not match');
    // A malformed ID names no token: an update of it did nothing (400, as any missing token).
    if (!isUUID(accessorID)) throw missingToken(accessorID);
    if (input.ExpirationTTL !== undefined && input.ExpirationTTL !== 0) throw invalid(`Cannot change expiration time of ${accessorID}`);
    const { token, links } = await this.store.transact(
      (tx) => {
        const existing = this.live(tx.getToken(accessorID), scope);
        if (!existing) throw missingToken(accessorID);
        if (input.SecretID && input.SecretID !== existing.SecretID) throw invalid("Changing a token's SecretID is not permitted");
        if ((input.Local ?? false) !== existing.Local) throw invalid(`Cannot toggle local mode of ${accessorID}`);
        if (input.AuthMethod && input.AuthMethod !== existing.AuthMethod) throw invalid(`Cannot change AuthMethod of ${accessorID}`);
        if (input.AuthMethodNamespace && input.AuthMethodNamespace !== (existing.AuthMethodNamespace ?? '')) {
          throw invalid(`Cannot change AuthMethod of ${accessorID}`);
        }
        if (input.ExpirationTime !== undefined) {
          const stored = existing.ExpirationTime === undefined ? undefined : Date.parse(existing.ExpirationTime);
          if (stored !== input.ExpirationTime) throw invalid(`Cannot change expiration time of ${accessorID}`);
        }
        const policies = resolveLinks(tx, 'policy', input.Policies, scope);
        const roles = resolveLinks(tx, 'role', input.Roles, scope);
        const content: TokenContent = {
          Description: input.Description ?? '',
          Policies: policies.ids,
          Roles: roles.ids,
          ...normalizeGrants(input, existing.Local),
          Local: existing.Local,
        };
        const next = { ...existing, ...givenFields(TOKEN_FIELDS, input), ...content };
        const record = tx.put('tokens', { ...next, Hash: tokenHash(next) });
        this.options.grants?.token(identity, record, tx);
        return { token: record, links: { policies: policies.named, roles: roles.named } };
      },
      audited(ctx, identity, 'token-update'),
    );
    return { value: this.withUse(tokenView(token, links, true)), index: token.ModifyIndex };
  }

  /**
   * A new SecretID for the token (docs/operator-insight.md): the one it replaces keeps authenticating for
   * `Overlap`, then nowhere. The token's content and Hash are unchanged; it replicates like
   * any write. A second rotation within an overlap ends the first one's at once.
   */
  async rotate(ctx: RequestContext, accessorID: string, input: RotateInput): Promise<WriteResult<TokenView>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write');
    if (!isUUID(accessorID)) throw missingToken(accessorID);
    if (accessorID.toLowerCase() === ANONYMOUS_TOKEN_ID) throw notPermitted('Rotating the secret of the anonymous token is not permitted');
    const overlap = input.Overlap ?? 0;
    if (overlap < 0 || overlap > MAX_ROTATION_OVERLAP_MS)
      throw invalid(`Invalid Overlap: must be between 0 and 24h, got ${formatDuration(overlap)}`);
    const now = this.clock.now();
    const { token, links } = await this.store.transact(
      (tx) => {
        const existing = this.live(tx.getToken(accessorID), scope);
        if (!existing) throw missingToken(accessorID);
        const { PreviousSecretID: _replaced, PreviousSecretExpirationTime: _until, ...rest } = existing;
        const record = tx.put('tokens', {
          ...rest,
          SecretID: freshID(tokenIDTaken(tx)),
          ...(overlap > 0
            ? { PreviousSecretID: existing.SecretID, PreviousSecretExpirationTime: new Date(now + overlap).toISOString() }
            : {}),
        });
        return {
          token: record,
          links: { policies: namedLinks(tx, 'policy', record.Policies), roles: namedLinks(tx, 'role', record.Roles) },
        };
      },
      audited(ctx, identity, 'token-rotate'),
    );
    return { value: this.withUse(tokenView(token, links, true)), index: token.ModifyIndex };
  }

  async clone(ctx: RequestContext, accessorID: string, input: CloneInput): Promise<WriteResult<TokenView>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    const now = this.clock.now();
    const { token, links } = await this.store.transact(
      (tx) => {
        const source = isUUID(accessorID) ? this.live(tx.getToken(accessorID), scope) : undefined;
        if (!source) throw missingToken(accessorID);
        if (source.AuthMethod) throw invalid('Cannot clone a token created from an auth method');
        const expires = admitToken(
          tx,
          source,
          source.ExpirationTime === undefined
            ? undefined
            : resolveExpiration({ time: Date.parse(source.ExpirationTime) }, now, this.options.limits),
          now,
          'create',
        );
        // Only live links are copied: a dangling link is invisible on the source too.
        const policies = namedLinks(tx, 'policy', source.Policies);
        const roles = namedLinks(tx, 'role', source.Roles);
        // The source's content, every hashed field of it, but for what a clone changes.
        const content: TokenContent = {
          ...contentOf(TOKEN_FIELDS, source),
          Description: input.Description ? input.Description : source.Description,
          Policies: policies.map((l) => ({ ID: l.ID })),
          Roles: roles.map((l) => ({ ID: l.ID })),
        };
        const record = tx.put(
          'tokens',
          newTokenRecord({
            AccessorID: freshID(tokenIDTaken(tx)),
            SecretID: freshID(tokenIDTaken(tx)),
            content,
            // What a write takes as given is the source's to copy, as its links are.
            given: givenFields(TOKEN_FIELDS, source),
            ...(expires !== undefined ? { expires } : {}),
            now,
            scope: { Namespace: source.Namespace, Partition: source.Partition },
          }),
        );
        this.options.grants?.token(identity, record, tx);
        return { token: record, links: { policies, roles } };
      },
      audited(ctx, identity, 'token-clone'),
    );
    return { value: tokenView(token, links, true), index: token.ModifyIndex };
  }

  async delete(ctx: RequestContext, accessorID: string): Promise<WriteResult<boolean>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write');
    // A malformed ID cannot name an object: refused as an update of it is (a well-formed one that names nothing answers false).
    if (!isUUID(accessorID)) throw missingToken(accessorID);
    if (accessorID.toLowerCase() === ANONYMOUS_TOKEN_ID) throw notPermitted('Delete operation not permitted on the anonymous token');
    let index = this.store.currentIndex();
    const deleted = await this.store.transact(
      (tx) => {
        const existing = tx.getToken(accessorID);
        // Expired tokens can still be deleted; tokens of another scope are not visible here.
        if (!existing || existing.Namespace !== scope.Namespace || existing.Partition !== scope.Partition) return false;
        if (identity.secret !== '' && (existing.SecretID === identity.secret || existing.PreviousSecretID === identity.secret)) {
          throw notPermitted("Deletion of the request's authorization token is not permitted");
        }
        index = tx.index;
        return tx.del('tokens', accessorID);
      },
      audited(ctx, identity, 'token-delete'),
    );
    return { value: deleted, index: Math.max(index, 1) };
  }
}

/** `?unused-since=`: a duration, as Consul's CLI writes them ("720h", "30m"). */
function unusedFor(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined || !Number.isFinite(ms) || ms < 0)
    throw invalid(`unused-since: expected a duration such as "720h" or "30m", got ${JSON.stringify(text.slice(0, 64))}`);
  return ms;
}

function checkNewID(field: 'AccessorID' | 'SecretID', id: string | undefined): void {
  if (id === undefined) return;
  if (!isUUID(id)) throw invalid(`Invalid Token: ${field} is not a valid UUID`);
  if (isReservedID(id)) throw invalid(`Invalid Token: UUIDs with the prefix ${JSON.stringify(RESERVED_PREFIX)} are reserved`);
}

function normalizeGrants(input: TokenInput, local: boolean) {
  return {
    ServiceIdentities: normalizeServiceIdentities(input.ServiceIdentities ?? [], 'token', local),
    NodeIdentities: normalizeNodeIdentities(input.NodeIdentities ?? [], 'token'),
    TemplatedPolicies: normalizeTemplatedPolicies(input.TemplatedPolicies ?? [], 'token', local),
  };
}
