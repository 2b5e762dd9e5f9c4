// Auth methods: how workloads prove who they are (their verifiers live in src/auth).
import { AUTH_METHOD_FIELDS, givenFields } from '../domain/records.js';
import { audited } from './audited.js';
import type { z } from 'zod';
import type { authMethodBody } from '../api/schemas.js';
import { checkRuleFields } from '../auth/binder.js';
import { METHOD_TYPES } from '../auth/fields.js';
import { redactURL } from '../auth/http.js';
import type { URLPolicy } from '../auth/url-policy.js';
import { formatDuration, parseDuration } from '../domain/duration.js';
import { invalid, missingTarget, notFound } from '../domain/errors.js';
import type { AuthMethodRecord, Scope } from '../domain/types.js';
import { authMethodID } from '../store/schema.js';
import type { StateReader, Store } from '../store/store.js';
import type { AclResolver, Identity } from './acl-resolver.js';
import type { RequestContext, WriteResult } from './context.js';
import { authorize, authorizeList } from './permissions.js';
import { REDACTED, viewOf } from './views.js';

/** The verifiers (and the JOSE library) load on first use: commands and daemons without auth methods never pay for them. */
const verifiers = () => import('../auth/methods.js');

/** AuthMethod as a client sends it, decoded by its schema (the schema is the one definition). */
export type AuthMethodInput = z.output<typeof authMethodBody>;

export interface AuthMethodView {
  Name: string;
  Type: string;
  DisplayName?: string;
  Description?: string;
  MaxTokenTTL?: string;
  TokenIdleTTL?: string;
  TokenLocality?: string;
  Config?: Record<string, unknown>;
  Namespace: string;
  Partition: string;
  CreateIndex: number;
  ModifyIndex: number;
}

const METHOD_NAME_RE = /^[A-Za-z0-9\-_]{1,128}$/;
/** Config fields that are secrets: shown only to callers with acl:write. */
const SECRET_CONFIG = ['ServiceAccountJWT'];

const badMethod = (message: string) => invalid(`Invalid Auth Method: ${message}`);
const methodNotFound = (name: string) => notFound(`Cannot find auth method ${JSON.stringify(name)}`);
const missingMethod = (name: string) => missingTarget(`Cannot find auth method ${JSON.stringify(name)}`);

/** Config fields that are URLs: without acl:write, shown without credentials or query string. */
const URL_CONFIG = ['JWKSURL', 'OIDCDiscoveryURL', 'Host'];

type MethodLimits = { minTTL: number; maxTTL: number; urls: URLPolicy };
type Verifiers = Awaited<ReturnType<typeof verifiers>>;

/**
 * A method's Type, MaxTokenTTL, TokenLocality and Config checked as the API checks them (a
 * write's body, and a restored record): Config keys come back as Consul spells them.
 */
function checkMethodFields(
  input: Pick<AuthMethodInput, 'Type' | 'MaxTokenTTL' | 'TokenLocality' | 'Config'>,
  limits: MethodLimits,
  v: Verifiers,
): { ttl: number; locality: AuthMethodRecord['TokenLocality']; config: Record<string, unknown> } {
  if (!input.Type) throw badMethod(`Type is required (one of: ${METHOD_TYPES.join(', ')})`);
  const ttl = input.MaxTokenTTL ?? 0;
  if (ttl !== 0 && (ttl < limits.minTTL || ttl > limits.maxTTL)) {
    throw badMethod(
      `MaxTokenTTL should be between ${formatDuration(limits.minTTL)} and ${formatDuration(limits.maxTTL)}, or 0 for no expiry`,
    );
  }
  const locality = input.TokenLocality ?? '';
  if (locality !== '' && locality !== 'local' && locality !== 'global')
    throw badMethod("TokenLocality should be one of 'local' or 'global'");
  return {
    ttl,
    locality: locality as AuthMethodRecord['TokenLocality'],
    config: v.validateMethodConfig(input.Type, input.Config ?? {}, limits.urls),
  };
}

/** The check of a stored method (a restore's record), by the function the API's writes use; throws its 400. */
export async function storedMethodCheck(limits: MethodLimits): Promise<(m: AuthMethodRecord) => void> {
  const v = await verifiers();
  return (m) => {
    const ttl = m.MaxTokenTTL === '' ? 0 : parseDuration(m.MaxTokenTTL);
    if (ttl === undefined) throw badMethod(`MaxTokenTTL ${JSON.stringify(m.MaxTokenTTL.slice(0, 64))} is not a duration`);
    if (m.TokenIdleTTL !== undefined && m.TokenIdleTTL !== '' && !((parseDuration(m.TokenIdleTTL) ?? -1) >= 0))
      throw badMethod(`TokenIdleTTL ${JSON.stringify(m.TokenIdleTTL.slice(0, 64))} is not a duration`);
    checkMethodFields({ Type: m.Type, MaxTokenTTL: ttl, TokenLocality: m.TokenLocality || undefined, Config: m.Config }, limits, v);
  };
}

export function authMethodView(m: AuthMethodRecord, showSecrets: boolean, withConfig = true): AuthMethodView {
  const shown = (k: string, v: unknown): unknown =>
    SECRET_CONFIG.includes(k) && v ? REDACTED : URL_CONFIG.includes(k) && typeof v === 'string' && v ? redactURL(v) : v;
  const config = showSecrets ? m.Config : Object.fromEntries(Object.entries(m.Config).map(([k, v]) => [k, shown(k, v)]));
  return viewOf(AUTH_METHOD_FIELDS, { ...m, Config: config }, { hash: () => '', detail: withConfig }) as unknown as AuthMethodView;
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
  private async content(
    input: AuthMethodInput,
    scope: Scope,
    name: string,
  ): Promise<Omit<AuthMethodRecord, 'CreateIndex' | 'ModifyIndex'>> {
    const { ttl, locality, config } = checkMethodFields(input, this.limits, await verifiers());
    return {
      ...givenFields(AUTH_METHOD_FIELDS, input),
      Name: name,
      Type: input.Type as string,
      DisplayName: input.DisplayName ?? '',
      Description: input.Description ?? '',
      MaxTokenTTL: ttl === 0 ? '' : formatDuration(ttl),
      // Absent: the agent's login_token_idle_ttl decides (docs/http-api.md, "Last use").
      ...(input.TokenIdleTTL !== undefined ? { TokenIdleTTL: formatDuration(input.TokenIdleTTL) } : {}),
      // Kept as sent (Consul echoes it): '' and 'local' mean the same.
      TokenLocality: locality,
      Config: config,
      Namespace: scope.Namespace,
      Partition: scope.Partition,
    };
  }

  async create(ctx: RequestContext, input: AuthMethodInput): Promise<WriteResult<AuthMethodView>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    const name = input.Name ?? '';
    if (name === '') throw badMethod('Name is required');
    if (!METHOD_NAME_RE.test(name))
      throw badMethod("Name invalid: only alphanumeric characters, '-' and '_' are allowed, at most 128 characters");
    const content = await this.content(input, scope, name);
    const m = await this.store.transact(
      (tx) => {
        if (tx.getAuthMethod(scope, name))
          throw invalid(
            `Invalid Auth Method: an auth method named ${JSON.stringify(name)} already exists; update it with PUT ` +
              `/v1/acl/auth-method/${name}`,
          );
        return tx.put('authMethods', content);
      },
      audited(ctx, identity, 'auth-method-create'),
    );
    return { value: authMethodView(m, true), index: m.ModifyIndex };
  }

  async update(ctx: RequestContext, name: string, input: AuthMethodInput): Promise<WriteResult<AuthMethodView>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.Name && input.Name !== name) throw badMethod('Name in URL and payload do not match');
    const current = this.reader.getAuthMethod(scope, name);
    if (!current) throw missingMethod(name);
    if (input.Type && input.Type !== current.Type)
      throw badMethod(`the Type of an auth method cannot change (it is ${JSON.stringify(current.Type)})`);
    const content = await this.content({ ...input, Type: current.Type }, scope, name);
    const m = await this.store.transact(
      (tx) => {
        const existing = tx.getAuthMethod(scope, name);
        if (!existing) throw missingMethod(name);
        if (existing.Type !== content.Type)
          throw badMethod(`the Type of an auth method cannot change (it is ${JSON.stringify(existing.Type)})`);
        // Rules of the method must still select on fields it has.
        for (const id of tx.ruleIDsOfAuthMethod(authMethodID(scope.Partition, scope.Namespace, name))) {
          const rule = tx.getBindingRule(id);
          if (rule)
            checkRuleFields(content, rule.Selector, rule.BindName, rule.BindVars, (message) =>
              badMethod(`binding rule ${rule.ID} would no longer be valid: ${message}`),
            );
        }
        return tx.put('authMethods', content);
      },
      audited(ctx, identity, 'auth-method-update'),
    );
    return { value: authMethodView(m, true), index: m.ModifyIndex };
  }

  /** Deletes the method, its binding rules and every token it issued, in one change. */
  async delete(ctx: RequestContext, name: string): Promise<WriteResult<boolean>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write');
    let index = this.store.currentIndex();
    const deleted = await this.store.transact(
      (tx) => {
        const m = tx.getAuthMethod(scope, name);
        if (!m) return false;
        index = tx.index;
        const id = authMethodID(scope.Partition, scope.Namespace, name);
        for (const rule of tx.ruleIDsOfAuthMethod(id)) tx.del('bindingRules', rule);
        for (const accessor of tx.tokenIDsOfAuthMethod(name)) {
          const t = tx.getToken(accessor);
          if (t && t.Partition === m.Partition && (t.AuthMethodNamespace ?? t.Namespace) === m.Namespace) tx.del('tokens', accessor);
        }
        return tx.del('authMethods', id);
      },
      audited(ctx, identity, 'auth-method-delete'),
    );
    return { value: deleted, index: Math.max(index, 1) };
  }
}
