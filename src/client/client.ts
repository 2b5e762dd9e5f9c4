import { readFileSync } from 'node:fs';
import type { ApiAnswer } from '../api/answers.js';
import { tokenListQuery } from '../api/token-list-filter.js';

import type {
  AuthMethodInput,
  BindingRuleInput,
  BootstrapResponse,
  CloneInput,
  InventoryResponse,
  LoginInput,
  PolicyInput,
  QuotaInput,
  ReplicationStatusResponse,
  RoleInput,
  RotateInput,
  SnapshotRestoreResponse,
  TokenInput,
  TokenResponse,
  AuditQuery,
  AuthorizationCheck,
  ClientOptions,
  ClientTLS,
  QueryOptions,
  ReadResult,
  RequestOptions,
  TokenListFilter,
} from './client-types.js';

export * from './client-types.js';

// A typed client for the watchword HTTP API. Its request and response types are the server's own
// zod schemas (src/api/schemas.ts, through client-types.ts), so the two cannot drift apart.

/** An answer other than 2xx, with the server's stable code and message. */
export class WatchwordApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Seconds to wait before asking again (a 429's or 503's Retry-After), when the server said. */
    readonly retryAfter?: number,
  ) {
    super(message);
    this.name = 'WatchwordApiError';
  }
}

function retryAfterOf(res: Response): number | undefined {
  const v = Number(res.headers.get('retry-after') ?? Number.NaN);
  return Number.isFinite(v) && v >= 0 ? v : undefined;
}

/** An error answer: its code from X-Service-Error-Code (or the JSON body), its message from the body (JSON or text). */
function apiError(res: Response, text: string): WatchwordApiError {
  let body: { code?: string; message?: string } | undefined;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed !== null && typeof parsed === 'object') body = parsed as typeof body;
  } catch {
    body = undefined;
  }
  const code = res.headers.get('x-service-error-code') ?? body?.code ?? 'UNKNOWN';
  return new WatchwordApiError(res.status, code, body?.message ?? (text.trim() || res.statusText), retryAfterOf(res));
}

export function normalizeAddress(address: string): string {
  const withScheme = /^https?:\/\//.test(address) ? address : `http://${address}`;
  return withScheme.replace(/\/+$/, '');
}

/** TLS settings from the environment, as the CLI and Consul's clients read them. */
function tlsFromEnv(): ClientTLS {
  const env = process.env;
  return {
    ...(env.WATCHWORD_CACERT ? { caFile: env.WATCHWORD_CACERT } : {}),
    ...(env.WATCHWORD_CLIENT_CERT ? { certFile: env.WATCHWORD_CLIENT_CERT } : {}),
    ...(env.WATCHWORD_CLIENT_KEY ? { keyFile: env.WATCHWORD_CLIENT_KEY } : {}),
  };
}

function readPEM(what: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

export class WatchwordClient {
  readonly address: string;
  private readonly options: ClientOptions;
  private readonly tls: ClientTLS;
  /** The fetch this client sends with: the platform's, or one over an agent holding the TLS settings. */
  private transport: Promise<typeof fetch> | undefined;

  constructor(options: ClientOptions = {}) {
    this.options = options;
    this.address = normalizeAddress(options.address ?? process.env.WATCHWORD_HTTP_ADDR ?? 'http://127.0.0.1:8500');
    this.tls = { ...tlsFromEnv(), ...options.tls };
  }

  private fetch(url: string | URL, init: RequestInit): Promise<Response> {
    this.transport ??= (async () => {
      const tls = this.tlsSettings();
      const max = this.options.maxConnections;
      if (Object.keys(tls).length === 0 && max === undefined) return fetch;
      const undici = await import('undici');
      const dispatcher = new undici.Agent({ connect: tls, ...(max !== undefined ? { connections: max } : {}) });
      return ((u: string | URL, i: RequestInit) => undici.fetch(u, { ...(i as object), dispatcher })) as unknown as typeof fetch;
    })();
    // A file that cannot be read fails this request, and the next one tries again.
    const sending = this.transport.then((f) => f(url, init));
    this.transport.catch(() => (this.transport = undefined));
    return sending;
  }

  /** The TLS settings as a socket takes them (PEM files read now); empty for plain HTTP. Throws when a file cannot be read. */
  tlsSettings(): { ca?: string; cert?: string; key?: string; servername?: string } {
    const t = this.tls;
    const ca = t.ca ?? (t.caFile ? readPEM('the CA file', t.caFile) : undefined);
    const cert = t.cert ?? (t.certFile ? readPEM('the client certificate', t.certFile) : undefined);
    const key = t.key ?? (t.keyFile ? readPEM('the client key', t.keyFile) : undefined);
    return {
      ...(ca ? { ca } : {}),
      ...(cert ? { cert } : {}),
      ...(key ? { key } : {}),
      ...(t.serverName ? { servername: t.serverName } : {}),
    };
  }

  /** A client like this one with other defaults (another token, namespace, datacenter). */
  with(options: Partial<ClientOptions>): WatchwordClient {
    return new WatchwordClient({ ...this.options, address: this.address, ...options });
  }

  /** The secret a request sends: its own, else the client's default (unless that is `null`), else the environment's. */
  private tokenFor(o: RequestOptions): string | undefined {
    if (o.token !== undefined) return o.token;
    if (this.options.token === null) return undefined;
    return this.options.token ?? process.env.WATCHWORD_HTTP_TOKEN;
  }

  /** One call; what it answers is read from the API's table of answers (api/answers.ts) by method and path. */
  private async call<M extends string, P extends string>(
    method: M,
    path: P,
    options: QueryOptions & { query?: Record<string, string | undefined>; body?: unknown } = {},
  ): Promise<ReadResult<ApiAnswer<M, P>>> {
    const url = new URL(this.address + path);
    const q: Record<string, string | undefined> = {
      ns: options.namespace ?? this.options.namespace,
      partition: options.partition ?? this.options.partition,
      dc: options.datacenter ?? this.options.datacenter,
      ...(options.index !== undefined ? { index: String(options.index) } : {}),
      ...(options.wait !== undefined ? { wait: options.wait } : {}),
      ...(options.hash !== undefined ? { hash: options.hash } : {}),
      ...(options.perPage !== undefined ? { per_page: String(options.perPage) } : {}),
      ...(options.cursor !== undefined ? { cursor: options.cursor } : {}),
      ...options.query,
    };
    for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== '') url.searchParams.set(k, v);
    const consistency = options.consistency ?? (method === 'GET' ? this.options.consistency : undefined);
    if (consistency === 'stale') url.searchParams.set('stale', '');
    if (consistency === 'consistent') url.searchParams.set('consistent', '');
    // Errors as JSON with their stable code (a Consul client gets them as text).
    const headers: Record<string, string> = { Accept: 'application/json' };
    const token = this.tokenFor(options);
    if (token) headers['X-Service-Token'] = token;
    if (options.body !== undefined) headers['Content-Type'] = 'application/json';
    const timeout = (this.options.timeoutMs ?? 30_000) + (options.index || options.hash ? 11 * 60_000 : 0);
    const res = await this.fetch(url, {
      method,
      headers,
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      signal: options.signal ? AbortSignal.any([options.signal, AbortSignal.timeout(timeout)]) : AbortSignal.timeout(timeout),
    });
    const text = await res.text();
    let value: unknown;
    try {
      value = text === '' ? undefined : JSON.parse(text);
    } catch {
      value = text;
    }
    if (!res.ok) throw apiError(res, text);
    return {
      value: value as ApiAnswer<M, P>,
      index: Number(res.headers.get('x-service-index') ?? 0),
      knownLeader: res.headers.get('x-service-knownleader') === 'true',
      lastContactMs: Number(res.headers.get('x-service-lastcontact') ?? 0),
      ...(res.headers.has('x-service-contenthash') ? { contentHash: res.headers.get('x-service-contenthash') as string } : {}),
      ...(res.headers.has('x-service-next-cursor') ? { nextCursor: res.headers.get('x-service-next-cursor') as string } : {}),
    };
  }

  /** Every item of a paged list, a page at a time (`perPage` each, default 1,000), following the cursors. */
  private async *pages<T>(page: (o: QueryOptions) => Promise<ReadResult<T[]>>, o: QueryOptions): AsyncGenerator<T> {
    let cursor: string | undefined;
    do {
      const r = await page({ ...o, perPage: o.perPage ?? 1000, ...(cursor !== undefined ? { cursor } : {}) });
      yield* r.value;
      cursor = r.nextCursor;
    } while (cursor !== undefined);
  }

  private async value<T>(promise: Promise<ReadResult<T>>): Promise<T> {
    return (await promise).value;
  }

  bootstrap(bootstrapSecret?: string): Promise<BootstrapResponse> {
    return this.value(this.call('PUT', '/v1/acl/bootstrap', bootstrapSecret ? { body: { BootstrapSecret: bootstrapSecret } } : {}));
  }

  readonly tokens = {
    create: (token: TokenInput, o: RequestOptions = {}) => this.value(this.call('PUT', '/v1/acl/token', { ...o, body: token })),
    read: (accessorID: string, o: QueryOptions = {}) => this.call('GET', `/v1/acl/token/${encodeURIComponent(accessorID)}`, o),
    readExpanded: (accessorID: string, o: QueryOptions = {}) =>
      this.call('GET', `/v1/acl/token/${encodeURIComponent(accessorID)}`, { ...o, query: { expanded: 'true' } }),
    readSelf: (o: QueryOptions = {}) => this.call('GET', '/v1/acl/token/self', o),
    update: (accessorID: string, token: TokenInput, o: RequestOptions = {}) =>
      this.value(this.call('PUT', `/v1/acl/token/${encodeURIComponent(accessorID)}`, { ...o, body: token })),
    clone: (accessorID: string, body: CloneInput = {}, o: RequestOptions = {}) =>
      this.value(this.call('PUT', `/v1/acl/token/${encodeURIComponent(accessorID)}/clone`, { ...o, body })),
    /** A new SecretID (answered); the replaced one keeps authenticating for `Overlap`, then nowhere. */
    rotate: (accessorID: string, body: RotateInput = {}, o: RequestOptions = {}) =>
      this.value(this.call('PUT', `/v1/acl/token/${encodeURIComponent(accessorID)}/rotate`, { ...o, body })),
    delete: (accessorID: string, o: RequestOptions = {}) =>
      this.value(this.call('DELETE', `/v1/acl/token/${encodeURIComponent(accessorID)}`, o)),
    list: (filter: TokenListFilter = {}, o: QueryOptions = {}) =>
      this.call('GET', '/v1/acl/tokens', { ...o, query: tokenListQuery(filter) }),
    /** Every token the filter keeps, fetched a page at a time (`o.perPage`, default 1,000). */
    iterate: (filter: TokenListFilter = {}, o: QueryOptions = {}) => this.pages((p) => this.tokens.list(filter, p), o),
  };

  readonly policies = {
    create: (policy: PolicyInput, o: RequestOptions = {}) => this.value(this.call('PUT', '/v1/acl/policy', { ...o, body: policy })),
    read: (id: string, o: QueryOptions = {}) => this.call('GET', `/v1/acl/policy/${encodeURIComponent(id)}`, o),
    readByName: (name: string, o: QueryOptions = {}) =>
      this.call('GET', `/v1/acl/policy/name/${name.split('/').map(encodeURIComponent).join('/')}`, o),
    update: (id: string, policy: PolicyInput, o: RequestOptions = {}) =>
      this.value(this.call('PUT', `/v1/acl/policy/${encodeURIComponent(id)}`, { ...o, body: policy })),
    /** What the update would flip of the checks recently asked for the tokens it reaches; nothing written. */
    dryRun: (id: string, policy: PolicyInput, o: RequestOptions = {}) =>
      this.value(this.call('PUT', `/v1/acl/policy/${encodeURIComponent(id)}?dry-run=true`, { ...o, body: policy })),
    delete: (id: string, o: RequestOptions = {}) => this.value(this.call('DELETE', `/v1/acl/policy/${encodeURIComponent(id)}`, o)),
    list: (o: QueryOptions = {}) => this.call('GET', '/v1/acl/policies', o),
    /** Every policy, fetched a page at a time (`o.perPage`, default 1,000). */
    iterate: (o: QueryOptions = {}) => this.pages((p) => this.policies.list(p), o),
  };

  readonly roles = {
    create: (role: RoleInput, o: RequestOptions = {}) => this.value(this.call('PUT', '/v1/acl/role', { ...o, body: role })),
    read: (id: string, o: QueryOptions = {}) => this.call('GET', `/v1/acl/role/${encodeURIComponent(id)}`, o),
    readByName: (name: string, o: QueryOptions = {}) => this.call('GET', `/v1/acl/role/name/${encodeURIComponent(name)}`, o),
    update: (id: string, role: RoleInput, o: RequestOptions = {}) =>
      this.value(this.call('PUT', `/v1/acl/role/${encodeURIComponent(id)}`, { ...o, body: role })),
    /** What the update would flip of the checks recently asked for the tokens it reaches; nothing written. */
    dryRun: (id: string, role: RoleInput, o: RequestOptions = {}) =>
      this.value(this.call('PUT', `/v1/acl/role/${encodeURIComponent(id)}?dry-run=true`, { ...o, body: role })),
    delete: (id: string, o: RequestOptions = {}) => this.value(this.call('DELETE', `/v1/acl/role/${encodeURIComponent(id)}`, o)),
    list: (filter: { policy?: string } = {}, o: QueryOptions = {}) =>
      this.call('GET', '/v1/acl/roles', { ...o, query: { policy: filter.policy } }),
    /** Every role the filter keeps, fetched a page at a time (`o.perPage`, default 1,000). */
    iterate: (filter: { policy?: string } = {}, o: QueryOptions = {}) => this.pages((p) => this.roles.list(filter, p), o),
  };

  readonly templatedPolicies = {
    list: (o: RequestOptions = {}) => this.value(this.call('GET', '/v1/acl/templated-policies', o)),
    read: (name: string, o: RequestOptions = {}) => this.value(this.call('GET', `/v1/acl/templated-policy/name/${name}`, o)),
    /** `variables`: `{ name: "web" }` (the key in any letter case, as the server reads it). */
    preview: (name: string, variables: { name?: string; Name?: string } = {}, o: RequestOptions = {}) =>
      this.value(this.call('POST', `/v1/acl/templated-policy/preview/${name}`, { ...o, body: variables })),
  };

  readonly authMethods = {
    create: (method: AuthMethodInput, o: RequestOptions = {}) =>
      this.value(this.call('PUT', '/v1/acl/auth-method', { ...o, body: method })),
    read: (name: string, o: QueryOptions = {}) => this.call('GET', `/v1/acl/auth-method/${encodeURIComponent(name)}`, o),
    update: (name: string, method: AuthMethodInput, o: RequestOptions = {}) =>
      this.value(this.call('PUT', `/v1/acl/auth-method/${encodeURIComponent(name)}`, { ...o, body: method })),
    /** Also deletes the method's binding rules and every token it issued. */
    delete: (name: string, o: RequestOptions = {}) => this.value(this.call('DELETE', `/v1/acl/auth-method/${encodeURIComponent(name)}`, o)),
    list: (o: QueryOptions = {}) => this.call('GET', '/v1/acl/auth-methods', o),
  };

  readonly bindingRules = {
    create: (rule: BindingRuleInput, o: RequestOptions = {}) => this.value(this.call('PUT', '/v1/acl/binding-rule', { ...o, body: rule })),
    read: (id: string, o: QueryOptions = {}) => this.call('GET', `/v1/acl/binding-rule/${encodeURIComponent(id)}`, o),
    update: (id: string, rule: BindingRuleInput, o: RequestOptions = {}) =>
      this.value(this.call('PUT', `/v1/acl/binding-rule/${encodeURIComponent(id)}`, { ...o, body: rule })),
    delete: (id: string, o: RequestOptions = {}) => this.value(this.call('DELETE', `/v1/acl/binding-rule/${encodeURIComponent(id)}`, o)),
    list: (filter: { authMethod?: string } = {}, o: QueryOptions = {}) =>
      this.call('GET', '/v1/acl/binding-rules', { ...o, query: { authmethod: filter.authMethod } }),
  };

  /** Quotas: how many tokens an auth method, a namespace or a partition may hold, and how long they may live. */
  readonly quotas = {
    create: (quota: QuotaInput, o: RequestOptions = {}) => this.value(this.call('PUT', '/v1/acl/quota', { ...o, body: quota })),
    read: (id: string, o: QueryOptions = {}) => this.call('GET', `/v1/acl/quota/${encodeURIComponent(id)}`, o),
    update: (id: string, quota: QuotaInput, o: RequestOptions = {}) =>
      this.value(this.call('PUT', `/v1/acl/quota/${encodeURIComponent(id)}`, { ...o, body: quota })),
    delete: (id: string, o: RequestOptions = {}) => this.value(this.call('DELETE', `/v1/acl/quota/${encodeURIComponent(id)}`, o)),
    list: (o: QueryOptions = {}) => this.call('GET', '/v1/acl/quotas', o),
  };

  /** The counts of this datacenter's tokens (GET /v1/acl/inventory): by method, role, policy, place; expiring, unused, acl:write holders; quotas' use. */
  inventory(o: QueryOptions = {}): Promise<InventoryResponse> {
    return this.value(this.call('GET', '/v1/acl/inventory', o));
  }

  /** Exchanges a bearer token from an auth method for a token (no ACL token needed). */
  login(input: LoginInput, o: RequestOptions = {}): Promise<TokenResponse> {
    return this.value(this.call('POST', '/v1/acl/login', { ...o, body: input }));
  }

  /** Deletes the token in `o.token` (or the client's), which a login must have created. */
  logout(o: RequestOptions = {}): Promise<boolean> {
    return this.value(this.call('POST', '/v1/acl/logout', o));
  }

  /** Backup and restore (GET/PUT /v1/snapshot): the snapshot file's bytes. */
  readonly snapshot = {
    save: async (o: RequestOptions = {}): Promise<Buffer> =>
      Buffer.from(await (await this.raw('GET', '/v1/snapshot', undefined, o)).arrayBuffer()),
    restore: async (file: Uint8Array, o: RequestOptions = {}): Promise<SnapshotRestoreResponse> =>
      (await (await this.raw('PUT', '/v1/snapshot', file, o)).json()) as SnapshotRestoreResponse,
  };

  /** A request whose body or answer is not JSON (snapshots); errors as for every call. */
  private async raw(method: string, path: string, body: Uint8Array | undefined, o: RequestOptions): Promise<Response> {
    const url = new URL(this.address + path);
    const dc = o.datacenter ?? this.options.datacenter;
    if (dc) url.searchParams.set('dc', dc);
    const headers: Record<string, string> = {
      'Content-Type': 'application/octet-stream',
      Accept: 'application/json, application/octet-stream',
    };
    const token = this.tokenFor(o);
    if (token) headers['X-Service-Token'] = token;
    const res = await this.fetch(url, {
      method,
      headers,
      ...(body ? { body: body as unknown as string } : {}),
      signal: AbortSignal.timeout(Math.max(this.options.timeoutMs ?? 30_000, 10 * 60_000)),
    });
    if (!res.ok) throw apiError(res, await res.text());
    return res;
  }

  /** Authorization decisions (docs/enforcing-client.md, "Enforcing policies in your service"). */
  readonly acl = {
    /** The tokens (a page, in AccessorID order) and roles granted a check, each with its reason; `cursor` is the last page's NextCursor. */
    whoCan: (check: AuthorizationCheck, page: { limit?: number; cursor?: string } = {}, o: RequestOptions = {}) =>
      this.value(
        this.call('GET', '/v1/acl/who-can', {
          ...o,
          query: {
            resource: check.Resource,
            segment: check.Segment,
            access: check.Access,
            limit: page.limit === undefined ? undefined : String(page.limit),
            cursor: page.cursor,
          },
        }),
      ),
    /** May the token (`o.token` or the client's) do each of these? 1 to 64 checks; the same array back with Allow. */
    authorize: (checks: AuthorizationCheck[], o: RequestOptions & { explain?: boolean } = {}) =>
      this.value(
        this.call('POST', '/v1/internal/acl/authorize', {
          ...o,
          body: checks,
          ...(o.explain ? { query: { explain: 'true' } } : {}),
        }),
      ),
    /**
     * The token's place, expiry, default policy and applicable rules, for judging it in-process
     * (the enforcing `Authorizer` uses it). With `hash`, blocks until they change.
     */
    tokenAuthorizer: (o: QueryOptions = {}) => this.call('GET', '/v1/internal/acl/authorizer', o),
  };

  replication(o: RequestOptions = {}): Promise<ReplicationStatusResponse> {
    return this.value(this.call('GET', '/v1/acl/replication', o));
  }

  readonly operator = {
    /** This datacenter's servers: role, term, applied position, lag, synchronous set (operator:read). */
    servers: (o: RequestOptions = {}) => this.value(this.call('GET', '/v1/operator/servers', o)),
    /** The primary this server follows: its datacenter, epoch, the index applied here, when last heard (operator:read). */
    primary: (o: RequestOptions = {}) => this.value(this.call('GET', '/v1/operator/primary', o)),
    /** This secondary datacenter becomes the primary; `force` while it still hears the old one (operator:write). */
    promote: (force = false, o: RequestOptions = {}) =>
      this.value(
        this.call('PUT', '/v1/operator/primary', {
          ...o,
          query: { promote: 'true', ...(force ? { force: 'true' } : {}) },
        }),
      ),
    /** At the primary: hands its role to the connected secondary `datacenter`, losing nothing (operator:write and acl:write). */
    transfer: (datacenter: string, o: RequestOptions = {}) =>
      this.value(this.call('PUT', '/v1/operator/primary', { ...o, query: { transfer: datacenter } })),
    /** Every server's release and versions, what a finalize would set, what waits (operator:read). */
    upgrade: (o: RequestOptions = {}) => this.value(this.call('GET', '/v1/operator/upgrade', o)),
    /**
     * Hands the datacenter's leadership to server `id` (or to a member of the leader's synchronous set), operator:write:
     * resolves once the new leader leads. Asked of any server of the datacenter.
     */
    transferLeader: (id?: string, o: RequestOptions = {}) =>
      this.value(this.call('POST', '/v1/operator/raft/transfer-leader', { ...o, ...(id ? { query: { id } } : {}) })),
    /** Finalizes the upgrade, at the primary (operator:write): refused while any server runs an older release. */
    finalize: (o: RequestOptions = {}) => this.value(this.call('PUT', '/v1/operator/upgrade', { ...o, query: { finalize: 'true' } })),
    /** This server's recent audit events, newest first (operator:read and acl:read); with `after`, the events after it, oldest first. */
    audit: (query: AuditQuery = {}, o: RequestOptions = {}) =>
      this.value(
        this.call('GET', '/v1/operator/audit', {
          ...o,
          query: Object.fromEntries(
            Object.entries(query)
              .filter(([, v]) => v !== undefined)
              .map(([k, v]) => [k, String(v)]),
          ),
        }),
      ),
  };

  readonly agent = {
    /** Configuration without secrets, version and role (agent:read). */
    self: (o: RequestOptions = {}) => this.value(this.call('GET', '/v1/agent/self', o)),
    leader: () => this.value(this.call('GET', '/v1/status/leader')),
    /** Addresses of this datacenter's servers. */
    peers: () => this.value(this.call('GET', '/v1/status/peers')),
    datacenters: () => this.value(this.call('GET', '/v1/catalog/datacenters')),
    /** Prometheus text (agent:read). */
    metrics: async (o: RequestOptions = {}): Promise<string> => {
      const token = this.tokenFor(o);
      const res = await this.fetch(`${this.address}/v1/agent/metrics?format=prometheus`, {
        ...(token ? { headers: { 'X-Service-Token': token } } : {}),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 30_000),
      });
      const text = await res.text();
      if (!res.ok) throw new WatchwordApiError(res.status, 'UNKNOWN', text || res.statusText);
      return text;
    },
    /** The durable index and change-log identity of the daemon. */
    index: () => this.value(this.call('GET', '/v1/internal/index')),
  };
}
