import type { z } from 'zod';
import type { authMethodBody, bindingRuleBody, loginBody } from '../api/schemas.js';
import { METHOD_TYPES, methodFields, selectorAllows } from '../auth/fields.js';
import { LoginRefused } from '../auth/identity.js';

/** The verifiers (and the JOSE library) load on first use: commands and daemons without auth methods never pay for them. */
const verifiers = () => import('../auth/methods.js');
import type { Clock } from '../domain/clock.js';
import { formatDuration, parseDuration } from '../domain/duration.js';
import { WatchwordError, invalid, notFound } from '../domain/errors.js';
import { normalizeNodeIdentities, normalizeServiceIdentities, normalizeTemplatedPolicies } from '../domain/grants.js';
import { isUUID } from '../domain/ids.js';
import { SelectorError, parseSelector, selectorMatches, selectorPaths } from '../domain/selector.js';
import { newTokenRecord } from '../domain/token.js';
import type { AuthMethodRecord, BindingRuleRecord, Link, NodeIdentity, Scope, ServiceIdentity, TemplatedPolicyLink, TokenRecord } from '../domain/types.js';
import { authMethodID } from '../store/schema.js';
import type { StateReader, Store, Tx } from '../store/store.js';
import type { AclResolver, Identity } from './acl-resolver.js';
import type { RequestContext, WriteResult } from './context.js';
import { namedLinks } from './links.js';
import { authorize, authorizeList } from './permissions.js';
import { selectScope } from './scope.js';
import { freshID, tokenIDTaken } from './uniqueness.js';
import { REDACTED, type TokenView, tokenView } from './views.js';
import { redactURL } from '../auth/http.js';
import type { URLPolicy } from '../auth/url-policy.js';

/** AuthMethod as a client sends it, decoded by its schema (the schema is the one definition). */
export type AuthMethodInput = z.output<typeof authMethodBody>;

/** BindingRule as a client sends it, decoded by its schema (the schema is the one definition). */
export type BindingRuleInput = z.output<typeof bindingRuleBody>;

/** Login as a client sends it, decoded by its schema (the schema is the one definition). */
export type LoginInput = z.output<typeof loginBody>;

export interface AuthMethodView {
  Name: string;
  Type: string;
  DisplayName?: string;
  Description?: string;
  MaxTokenTTL?: string;
  TokenLocality?: string;
  Config?: Record<string, unknown>;
  Namespace: string;
  Partition: string;
  CreateIndex: number;
  ModifyIndex: number;
}

const METHOD_NAME_RE = /^[A-Za-z0-9\-_]{1,128}$/;
const BIND_TYPES = ['service', 'node', 'role', 'policy', 'templated-policy'] as const;
type BindType = (typeof BIND_TYPES)[number];
/** Config fields that are secrets: shown only to callers with acl:write. */
const SECRET_CONFIG = ['ServiceAccountJWT'];

const badMethod = (message: string) => invalid(`Invalid Auth Method: ${message}`);
const badRule = (message: string) => invalid(`Invalid Binding Rule: ${message}`);
const methodNotFound = (name: string) => notFound(`Cannot find auth method ${JSON.stringify(name)}`);
const ruleNotFound = (id: string) => notFound(`Cannot find binding rule ${JSON.stringify(id)}`);

const inScope = <R extends Scope>(r: R | undefined, scope: Scope): R | undefined => (r && r.Namespace === scope.Namespace && r.Partition === scope.Partition ? r : undefined);

/** Config fields that are URLs: without acl:write, shown without credentials or query string. */
const URL_CONFIG = ['JWKSURL', 'OIDCDiscoveryURL', 'Host'];

export function authMethodView(m: AuthMethodRecord, showSecrets: boolean, withConfig = true): AuthMethodView {
  const shown = (k: string, v: unknown): unknown => (SECRET_CONFIG.includes(k) && v ? REDACTED : URL_CONFIG.includes(k) && typeof v === 'string' && v ? redactURL(v) : v);
  const config = showSecrets ? m.Config : Object.fromEntries(Object.entries(m.Config).map(([k, v]) => [k, shown(k, v)]));
  return {
    Name: m.Name,
    Type: m.Type,
    ...(m.DisplayName ? { DisplayName: m.DisplayName } : {}),
    ...(m.Description ? { Description: m.Description } : {}),
    ...(m.MaxTokenTTL ? { MaxTokenTTL: m.MaxTokenTTL } : {}),
    ...(m.TokenLocality === 'global' ? { TokenLocality: 'global' } : {}),
    ...(withConfig ? { Config: config } : {}),
    Namespace: m.Namespace,
    Partition: m.Partition,
    CreateIndex: m.CreateIndex,
    ModifyIndex: m.ModifyIndex,
  };
}

/** `${path}` references in a BindName (or BindVars.name). */
function interpolations(text: string): string[] {
  return [...text.matchAll(/\$\{([^}]*)\}/g)].map((m) => (m[1] as string).trim());
}

/** Replaces `${path}` with the identity's variables; undefined when one is unknown. */
function interpolate(text: string, variables: Record<string, string>): string | undefined {
  let missing = false;
  const out = text.replace(/\$\{([^}]*)\}/g, (_m, path: string) => {
    const v = variables[path.trim()];
    if (v === undefined) missing = true;
    return v ?? '';
  });
  return missing ? undefined : out;
}

export class AuthMethodService {
  constructor(
    private readonly store: Store,
    private readonly resolver: AclResolver,
    private readonly limits: { minTTL: number; maxTTL: number; urls: URLPolicy },
  ) {}

  private get reader(): StateReader {
    return this.store.reader;
  }

  private canSeeSecrets(identity: Identity, scope: Scope): boolean {
    return identity.authorizer.canWrite(scope.Partition, scope.Namespace);
  }

  async read(ctx: RequestContext, name: string): Promise<AuthMethodView> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'read');
    const m = this.reader.getAuthMethod(scope, name);
    if (!m) throw methodNotFound(name);
    return authMethodView(m, this.canSeeSecrets(identity, scope));
  }

  async list(ctx: RequestContext): Promise<AuthMethodView[]> {
    const { scope, namespaces, canSee } = await authorizeList(this.resolver, ctx, (p) => this.reader.namespacesOf('authMethods', p));
    if (namespaces.length === 0) return [];
    return this.reader
      .listAuthMethods(scope.Partition, namespaces)
      .filter(canSee)
      .map((m) => authMethodView(m, false, false));
  }

  /** The record a body describes, checked as Consul checks it. */
  private async content(input: AuthMethodInput, scope: Scope, name: string): Promise<Omit<AuthMethodRecord, 'CreateIndex' | 'ModifyIndex'>> {
    if (!input.Type) throw badMethod(`Type is required (one of: ${METHOD_TYPES.join(', ')})`);
    const ttl = input.MaxTokenTTL ?? 0;
    if (ttl !== 0 && (ttl < this.limits.minTTL || ttl > this.limits.maxTTL)) {
      throw badMethod(`MaxTokenTTL should be between ${formatDuration(this.limits.minTTL)} and ${formatDuration(this.limits.maxTTL)}, or 0 for no expiry`);
    }
    const locality = input.TokenLocality ?? '';
    if (locality !== '' && locality !== 'local' && locality !== 'global') throw badMethod("TokenLocality should be one of 'local' or 'global'");
    const config = input.Config ?? {};
    (await verifiers()).validateMethodConfig(input.Type, config, this.limits.urls);
    return {
      Name: name,
      Type: input.Type,
      DisplayName: input.DisplayName ?? '',
      Description: input.Description ?? '',
      MaxTokenTTL: ttl === 0 ? '' : formatDuration(ttl),
      TokenLocality: locality === 'global' ? 'global' : 'local',
      Config: config,
      Namespace: scope.Namespace,
      Partition: scope.Partition,
    };
  }

  async create(ctx: RequestContext, input: AuthMethodInput): Promise<WriteResult<AuthMethodView>> {
    const { scope } = await authorize(this.resolver, ctx, 'write', input);
    const name = input.Name ?? '';
    if (name === '') throw badMethod('Name is required');
    if (!METHOD_NAME_RE.test(name)) throw badMethod("Name invalid: only alphanumeric characters, '-' and '_' are allowed, at most 128 characters");
    const content = await this.content(input, scope, name);
    const m = await this.store.transact((tx) => {
      if (tx.getAuthMethod(scope, name)) throw invalid(`Invalid Auth Method: an auth method named ${JSON.stringify(name)} already exists; update it with PUT /v1/acl/auth-method/${name}`);
      return tx.putAuthMethod(content);
    });
    return { value: authMethodView(m, true), index: m.ModifyIndex };
  }

  async update(ctx: RequestContext, name: string, input: AuthMethodInput): Promise<WriteResult<AuthMethodView>> {
    const { scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.Name && input.Name !== name) throw badMethod('Name in URL and payload do not match');
    const current = this.reader.getAuthMethod(scope, name);
    if (!current) throw methodNotFound(name);
    if (input.Type && input.Type !== current.Type) throw badMethod(`the Type of an auth method cannot change (it is ${JSON.stringify(current.Type)})`);
    const content = await this.content({ ...input, Type: current.Type }, scope, name);
    const m = await this.store.transact((tx) => {
      const existing = tx.getAuthMethod(scope, name);
      if (!existing) throw methodNotFound(name);
      if (existing.Type !== content.Type) throw badMethod(`the Type of an auth method cannot change (it is ${JSON.stringify(existing.Type)})`);
      // Rules of the method must still select on fields it has.
      for (const id of tx.ruleIDsOfAuthMethod(authMethodID(scope.Partition, scope.Namespace, name))) {
        const rule = tx.getBindingRule(id);
        if (rule) checkRuleFields(content, rule.Selector, rule.BindName, rule.BindVars, (message) => badMethod(`binding rule ${rule.ID} would no longer be valid: ${message}`));
      }
      return tx.putAuthMethod(content);
    });
    return { value: authMethodView(m, true), index: m.ModifyIndex };
  }

  /** Deletes the method, its binding rules and every token it issued, in one change. */
  async delete(ctx: RequestContext, name: string): Promise<WriteResult<boolean>> {
    const { scope } = await authorize(this.resolver, ctx, 'write');
    let index = this.store.currentIndex();
    const deleted = await this.store.transact((tx) => {
      const m = tx.getAuthMethod(scope, name);
      if (!m) return false;
      index = tx.index;
      const id = authMethodID(scope.Partition, scope.Namespace, name);
      for (const rule of tx.ruleIDsOfAuthMethod(id)) tx.deleteBindingRule(rule);
      for (const accessor of tx.tokenIDsOfAuthMethod(name)) {
        const t = tx.getToken(accessor);
        if (t && t.Partition === m.Partition && (t.AuthMethodNamespace ?? t.Namespace) === m.Namespace) tx.deleteToken(accessor);
      }
      return tx.deleteAuthMethod(id);
    });
    return { value: deleted, index: Math.max(index, 1) };
  }
}

/** A selector may only name fields the method's identities have; a BindName only variables it provides. */
function checkRuleFields(method: Pick<AuthMethodRecord, 'Type' | 'Config'>, selector: string, bindName: string, bindVars: { name?: string } | undefined, fail: (message: string) => WatchwordError): void {
  const fields = new Set(methodFields(method));
  const provides = method.Type === 'jwt' ? 'value.<claim>, list.<claim>' : [...fields].join(', ') || 'none';
  if (selector.trim() !== '') {
    let paths: string[];
    try {
      paths = selectorPaths(parseSelector(selector));
    } catch (err) {
      if (err instanceof SelectorError) throw fail(`invalid Selector: ${err.message}`);
      throw err;
    }
    for (const p of paths) {
      if (!selectorAllows(method, p)) throw fail(`invalid Selector: unknown field ${JSON.stringify(p)} (this auth method provides: ${provides})`);
    }
  }
  for (const text of [bindName, bindVars?.name ?? '']) {
    for (const ref of interpolations(text)) if (!fields.has(ref)) throw fail(`invalid BindName: unknown variable \${${ref}} (this auth method provides: ${[...fields].join(', ') || 'none'})`);
  }
}

export class BindingRuleService {
  constructor(
    private readonly store: Store,
    private readonly resolver: AclResolver,
  ) {}

  private get reader(): StateReader {
    return this.store.reader;
  }

  async read(ctx: RequestContext, id: string): Promise<BindingRuleRecord> {
    const { scope } = await authorize(this.resolver, ctx, 'read');
    const rule = isUUID(id) ? inScope(this.reader.getBindingRule(id), scope) : undefined;
    if (!rule) throw ruleNotFound(id);
    return rule;
  }

  async list(ctx: RequestContext, authMethod: string | undefined): Promise<BindingRuleRecord[]> {
    const { scope, namespaces, canSee } = await authorizeList(this.resolver, ctx, (p) => this.reader.namespacesOf('bindingRules', p));
    if (namespaces.length === 0) return [];
    return this.reader
      .listBindingRules(scope.Partition, namespaces, authMethod || undefined)
      .filter(canSee);
  }

  private content(tx: Tx, input: BindingRuleInput, scope: Scope, method: string) {
    const m = tx.getAuthMethod(scope, method);
    if (!m) throw badRule(`auth method ${JSON.stringify(method)} does not exist`);
    const bindType = input.BindType ?? '';
    if (bindType === '') throw badRule('BindType is required');
    if (!BIND_TYPES.includes(bindType as BindType)) throw badRule(`BindType ${JSON.stringify(bindType)} is not one of: ${BIND_TYPES.join(', ')}`);
    const bindName = input.BindName ?? '';
    if (bindName === '') throw badRule('BindName is required');
    const selector = input.Selector ?? '';
    const bindVars = input.BindVars?.name !== undefined ? { name: input.BindVars.name } : undefined;
    checkRuleFields(m, selector, bindName, bindVars, badRule);
    return {
      Description: input.Description ?? '',
      AuthMethod: method,
      Selector: selector,
      BindType: bindType as BindType,
      BindName: bindName,
      ...(bindVars ? { BindVars: bindVars } : {}),
      Namespace: scope.Namespace,
      Partition: scope.Partition,
    };
  }

  async create(ctx: RequestContext, input: BindingRuleInput): Promise<WriteResult<BindingRuleRecord>> {
    const { scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.ID) throw badRule('ID must not be set when creating a binding rule; use PUT /v1/acl/binding-rule/:id to update');
    const method = input.AuthMethod ?? '';
    if (method === '') throw badRule('AuthMethod is required');
    const rule = await this.store.transact((tx) => {
      const content = this.content(tx, input, scope, method);
      return tx.putBindingRule({ ID: freshID((id) => tx.getBindingRule(id) !== undefined), ...content });
    });
    return { value: rule, index: rule.ModifyIndex };
  }

  async update(ctx: RequestContext, id: string, input: BindingRuleInput): Promise<WriteResult<BindingRuleRecord>> {
    const { scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.ID && input.ID !== id) throw badRule('ID in URL and payload do not match');
    if (!isUUID(id)) throw ruleNotFound(id);
    const rule = await this.store.transact((tx) => {
      const existing = inScope(tx.getBindingRule(id), scope);
      if (!existing) throw ruleNotFound(id);
      if (input.AuthMethod && input.AuthMethod !== existing.AuthMethod) throw badRule(`the AuthMethod of a binding rule cannot change (it is ${JSON.stringify(existing.AuthMethod)})`);
      const content = this.content(tx, input, scope, existing.AuthMethod);
      return tx.putBindingRule({ ID: id, ...content });
    });
    return { value: rule, index: rule.ModifyIndex };
  }

  async delete(ctx: RequestContext, id: string): Promise<WriteResult<boolean>> {
    const { scope } = await authorize(this.resolver, ctx, 'write');
    if (!isUUID(id)) throw ruleNotFound(id);
    let index = this.store.currentIndex();
    const deleted = await this.store.transact((tx) => {
      if (!inScope(tx.getBindingRule(id), scope)) return false;
      index = tx.index;
      return tx.deleteBindingRule(id);
    });
    return { value: deleted, index: Math.max(index, 1) };
  }
}

/** What the rules that matched bind, before links are resolved. */
interface Bindings {
  services: ServiceIdentity[];
  nodes: NodeIdentity[];
  roles: string[];
  policies: string[];
  templated: TemplatedPolicyLink[];
}

export class LoginService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly options: { datacenter: string; urls: URLPolicy },
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
    if (!method) throw new WatchwordError('ACL_NOT_FOUND', `ACL not found: auth method ${JSON.stringify(name)} not found`);
    const now = this.clock.now();
    let identity: Awaited<ReturnType<Awaited<ReturnType<typeof verifiers>>['verifyBearer']>>;
    try {
      identity = await (await verifiers()).verifyBearer(method, input.BearerToken, now, this.options.urls);
    } catch (err) {
      if (err instanceof LoginRefused) throw new WatchwordError('PERMISSION_DENIED', `Permission denied: ${err.message}`);
      throw err;
    }
    // Refused before any selector sees it: no claim may make matching costly.
    const long = longClaim(identity.selectable);
    if (long !== undefined) throw new WatchwordError('PERMISSION_DENIED', `Permission denied: the bearer token's claim ${long} is longer than ${MAX_CLAIM_CHARS} characters`);
    const rules = this.store.reader.listBindingRules(scope.Partition, [scope.Namespace], name);
    const bindings: Bindings = { services: [], nodes: [], roles: [], policies: [], templated: [] };
    for (const rule of rules) {
      if (!selectorMatches(rule.Selector, identity.selectable)) continue;
      const bound = interpolate(rule.BindName, identity.variables);
      if (bound === undefined || bound === '') continue;
      switch (rule.BindType) {
        case 'service':
          bindings.services.push({ ServiceName: bound });
          break;
        case 'node':
          bindings.nodes.push({ NodeName: bound, Datacenter: this.options.datacenter });
          break;
        case 'role':
          bindings.roles.push(bound);
          break;
        case 'policy':
          bindings.policies.push(bound);
          break;
        case 'templated-policy': {
          const varName = rule.BindVars?.name === undefined ? undefined : interpolate(rule.BindVars.name, identity.variables);
          bindings.templated.push({ TemplateName: bound, ...(varName ? { TemplateVariables: { name: varName } } : {}) });
          break;
        }
      }
    }
    const ttl = method.MaxTokenTTL ? (parseDuration(method.MaxTokenTTL) ?? 0) : 0;
    const local = method.TokenLocality !== 'global';
    const meta = input.Meta && Object.keys(input.Meta).length > 0 ? input.Meta : undefined;
    const token = await this.store.transact((tx) => {
      // Roles and policies bound by name that do not exist are left out, as Consul does.
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
      if (roles.length + policies.length + grants.ServiceIdentities.length + grants.NodeIdentities.length + grants.TemplatedPolicies.length === 0) {
        throw new WatchwordError('PERMISSION_DENIED', 'Permission denied: no binding rule of the auth method matched the bearer token');
      }
      // The method may have been deleted meanwhile: no token outlives it.
      if (!tx.getAuthMethod(scope, name)) throw new WatchwordError('ACL_NOT_FOUND', `ACL not found: auth method ${JSON.stringify(name)} not found`);
      const taken = tokenIDTaken(tx);
      const content = {
        Description: meta ? `token created via login: ${JSON.stringify(meta)}` : 'token created via login',
        Policies: policies,
        Roles: roles,
        ...grants,
        Local: local,
      };
      const record: Omit<TokenRecord, 'CreateIndex' | 'ModifyIndex'> = {
        ...newTokenRecord({ AccessorID: freshID(taken), SecretID: freshID(taken), content, ...(ttl > 0 ? { expires: now + ttl } : {}), now, scope }),
        AuthMethod: name,
      };
      return tx.putToken(record);
    });
    const named = { policies: namedLinks(this.store.reader, 'policy', token.Policies), roles: namedLinks(this.store.reader, 'role', token.Roles) };
    return { value: tokenView(token, named, true), index: token.ModifyIndex };
  }

  /** Deletes the request's token if a login made it. */
  async logout(ctx: RequestContext): Promise<WriteResult<boolean>> {
    const secret = ctx.secret ?? '';
    if (secret === '') throw new WatchwordError('ACL_NOT_FOUND', 'ACL not found: logout needs the token to log out in X-Service-Token');
    const token = this.store.reader.getTokenBySecret(secret);
    if (!token) throw new WatchwordError('ACL_NOT_FOUND', 'ACL not found');
    if (!token.AuthMethod) throw new WatchwordError('PERMISSION_DENIED', 'Permission denied: the token was not created by a login, so it cannot log out');
    let index = this.store.currentIndex();
    await this.store.transact((tx) => {
      index = tx.index;
      tx.deleteToken(token.AccessorID);
    });
    return { value: true, index };
  }
}

/** Longest claim value a login accepts (8 KiB). */
const MAX_CLAIM_CHARS = 8192;

/** The selector path of the first claim value longer than MAX_CLAIM_CHARS, if any. */
function longClaim(selectable: Record<string, unknown>, path = ''): string | undefined {
  for (const [k, v] of Object.entries(selectable)) {
    const at = path ? `${path}.${k}` : k;
    if (typeof v === 'string' && v.length > MAX_CLAIM_CHARS) return at;
    if (Array.isArray(v) && v.some((x) => typeof x === 'string' && x.length > MAX_CLAIM_CHARS)) return at;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      const inner = longClaim(v as Record<string, unknown>, at);
      if (inner !== undefined) return inner;
    }
  }
  return undefined;
}
