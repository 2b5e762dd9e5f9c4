// Login and logout: a verified bearer token from an auth method exchanged for a token.
import { actorOf, audited } from './audited.js';
import type { z } from 'zod';
import type { loginBody } from '../api/schemas.js';
import { type Bindings, MAX_CLAIM_CHARS, bind, longClaim } from '../auth/binder.js';
import { type Identity as VerifiedIdentity, LoginRefused } from '../auth/identity.js';
import { SelectorTimeout, type Selectors } from '../auth/selectors.js';
import type { URLPolicy } from '../auth/url-policy.js';
import type { Clock } from '../domain/clock.js';
import { parseDuration } from '../domain/duration.js';
import { admitToken } from './quotas.js';
import { WatchwordError, invalid } from '../domain/errors.js';
import { normalizeNodeIdentities, normalizeServiceIdentities, normalizeTemplatedPolicies } from '../domain/grants.js';
import { type TokenContent, newTokenRecord } from '../domain/token.js';
import type { AuthMethodRecord, Link, Scope, TokenRecord } from '../domain/types.js';
import type { StateReader } from '../store/memory.js';
import type { Store } from '../store/store.js';
import type { RequestContext, WriteResult } from './context.js';
import { namedLinks } from './links.js';
import { selectScope } from './scope.js';
import { freshID, tokenIDTaken } from './uniqueness.js';
import { type TokenView, tokenView } from './views.js';

/** The verifiers (and the JOSE library) load on first use: commands and daemons without auth methods never pay for them. */
const verifiers = () => import('../auth/methods.js');

/** Login as a client sends it, decoded by its schema (the schema is the one definition). */
export type LoginInput = z.output<typeof loginBody>;

export class LoginService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly options: { datacenter: string; urls: URLPolicy },
    private readonly selectors: Pick<Selectors, 'match'>,
  ) {}

  /** The method a login names, in the scope the request points at (the caller has no token yet). */
  method(ctx: RequestContext, input: LoginInput): AuthMethodRecord | undefined {
    const scope = this.scopeOf(ctx, input);
    return input.AuthMethod ? this.store.reader.getAuthMethod(scope, input.AuthMethod) : undefined;
  }

  private scopeOf(ctx: RequestContext, input: LoginInput): Scope {
    // No token yet: the body or the request's hints say where, else the default namespace.
    return selectScope(undefined, ctx.hints, input);
  }

  async login(ctx: RequestContext, input: LoginInput): Promise<WriteResult<TokenView>> {
    const scope = this.scopeOf(ctx, input);
    const name = input.AuthMethod ?? '';
    if (name === '') throw invalid('Invalid Login: AuthMethod is required');
    if (!input.BearerToken) throw invalid('Invalid Login: BearerToken is required');
    const method = this.store.reader.getAuthMethod(scope, name);
    if (!method) throw methodNotFound(name);
    const now = this.clock.now();
    const identity = await this.verified(method, input.BearerToken, now);
    const bindings = await this.bindingsOf(scope, name, identity);
    const ttl = method.MaxTokenTTL ? (parseDuration(method.MaxTokenTTL) ?? 0) : 0;
    const local = method.TokenLocality !== 'global';
    const meta = input.Meta && Object.keys(input.Meta).length > 0 ? input.Meta : undefined;
    const token = await this.store.transact(
      (tx) => {
        const content = loginContent(tx, scope, bindings, local, meta);
        // The method may have been deleted meanwhile: no token outlives it.
        if (!tx.getAuthMethod(scope, name)) throw methodNotFound(name);
        const taken = tokenIDTaken(tx);
        const expires = admitToken(tx, { ...scope, AuthMethod: name, Local: local }, ttl > 0 ? now + ttl : undefined, now, 'login');
        const record: Omit<TokenRecord, 'CreateIndex' | 'ModifyIndex'> = {
          ...newTokenRecord({
            AccessorID: freshID(taken),
            SecretID: freshID(taken),
            content,
            ...(expires !== undefined ? { expires } : {}),
            now,
            scope,
          }),
          AuthMethod: name,
        };
        return tx.put('tokens', record);
      },
      audited(ctx, undefined, 'login', { AuthMethod: name, BindingRules: bindings.matched }),
    );
    const named = {
      policies: namedLinks(this.store.reader, 'policy', token.Policies),
      roles: namedLinks(this.store.reader, 'role', token.Roles),
    };
    return { value: tokenView(token, named, true), index: token.ModifyIndex };
  }

  /** The bearer token verified by its method; refused (403) when it does not verify or a claim is too long to match against. */
  private async verified(method: AuthMethodRecord, bearer: string, now: number): Promise<VerifiedIdentity> {
    let identity: VerifiedIdentity;
    try {
      identity = await (await verifiers()).verifyBearer(method, bearer, now, this.options.urls);
    } catch (err) {
      if (err instanceof LoginRefused) throw new WatchwordError('PERMISSION_DENIED', `Permission denied: ${err.message}`);
      throw err;
    }
    // Refused before any selector sees it: no claim may make matching costly.
    const long = longClaim(identity.selectable);
    if (long !== undefined)
      throw new WatchwordError(
        'PERMISSION_DENIED',
        `Permission denied: the bearer token's claim ${long} is longer than ${MAX_CLAIM_CHARS} characters`,
      );
    return identity;
  }

  /** What the method's binding rules bind for this identity (their selectors judged off the event loop, in bounded time). */
  private async bindingsOf(scope: Scope, name: string, identity: VerifiedIdentity): Promise<Bindings> {
    const rules = this.store.reader.listBindingRules(scope.Partition, [scope.Namespace], name);
    let matched: boolean[];
    try {
      matched = await this.selectors.match(
        rules.map((r) => r.Selector),
        identity.selectable,
      );
    } catch (err) {
      if (err instanceof SelectorTimeout) throw new WatchwordError('PERMISSION_DENIED', `Permission denied: ${err.message}`);
      throw err;
    }
    return bind(rules, matched, identity, this.options.datacenter);
  }

  /** Deletes the request's token if a login made it. */
  async logout(ctx: RequestContext): Promise<WriteResult<boolean>> {
    const secret = ctx.secret ?? '';
    if (secret === '') throw new WatchwordError('ACL_NOT_FOUND', 'ACL not found: logout needs the token to log out in X-Service-Token');
    const token = this.store.reader.getTokenBySecret(secret);
    if (!token) throw new WatchwordError('ACL_NOT_FOUND', 'ACL not found');
    if (!token.AuthMethod)
      throw new WatchwordError('PERMISSION_DENIED', 'Permission denied: the token was not created by a login, so it cannot log out');
    let index = this.store.currentIndex();
    await this.store.transact(
      (tx) => {
        index = tx.index;
        tx.del('tokens', token.AccessorID);
      },
      {
        audit: {
          type: 'logout',
          actor: { ...actorOf(ctx, undefined), AccessorID: token.AccessorID },
          details: { AuthMethod: token.AuthMethod },
        },
      },
    );
    return { value: true, index };
  }
}

const methodNotFound = (name: string): WatchwordError =>
  new WatchwordError('ACL_NOT_FOUND', `ACL not found: auth method ${JSON.stringify(name)} not found`);

/**
 * A login token's content from what the rules bound: roles and policies bound by name that do not
 * exist are left out, as Consul does; a login that binds nothing at all is refused (403).
 */
function loginContent(
  tx: Pick<StateReader, 'getRoleByName' | 'getPolicyByName'>,
  scope: Scope,
  bindings: Bindings,
  local: boolean,
  meta: Record<string, string> | undefined,
): TokenContent {
  const roles: Link[] = [];
  for (const r of new Set(bindings.roles)) {
    const role = tx.getRoleByName(scope, r);
    if (role) roles.push({ ID: role.ID });
  }
  const policies: Link[] = [];
  for (const p of new Set(bindings.policies)) {
    const policy = tx.getPolicyByName(scope, p);
    if (policy) policies.push({ ID: policy.ID });
  }
  const grants = {
    ServiceIdentities: normalizeServiceIdentities(bindings.services, 'token', local),
    NodeIdentities: normalizeNodeIdentities(bindings.nodes, 'token'),
    TemplatedPolicies: normalizeTemplatedPolicies(bindings.templated, 'token', local),
  };
  const bound =
    roles.length + policies.length + grants.ServiceIdentities.length + grants.NodeIdentities.length + grants.TemplatedPolicies.length;
  if (bound === 0)
    throw new WatchwordError('PERMISSION_DENIED', 'Permission denied: no binding rule of the auth method matched the bearer token');
  return {
    Description: meta ? `token created via login: ${JSON.stringify(meta)}` : 'token created via login',
    Policies: policies,
    Roles: roles,
    ...grants,
    Local: local,
  };
}
