// The HTTP client's options, queries and answers (client.ts), apart from the calls themselves.
import type { z } from 'zod';
import type {
  authMethodBody,
  bindingRuleBody,
  cloneBody,
  loginBody,
  policyBody,
  quotaBody,
  roleBody,
  rotateBody,
  tokenBody,
} from '../api/schemas.js';

export type TokenInput = z.input<typeof tokenBody>;
export type CloneInput = z.input<typeof cloneBody>;
/** A rotation: how long the replaced secret keeps working (`"10m"`, or nanoseconds; default 0, at most 24h). */
export type RotateInput = z.input<typeof rotateBody>;
export type PolicyInput = z.input<typeof policyBody>;
export type RoleInput = z.input<typeof roleBody>;
export type AuthMethodInput = z.input<typeof authMethodBody>;
export type BindingRuleInput = z.input<typeof bindingRuleBody>;
export type LoginInput = z.input<typeof loginBody>;
/** A quota (docs/http-api.md, "Quotas"): `Name`, exactly one of `AuthMethod`, `Namespace`, `Partition`, and its limits. */
export type QuotaInput = z.input<typeof quotaBody>;
export type {
  AgentSelfResponse,
  AuthMethodResponse,
  BindingRuleResponse,
  BootstrapResponse,
  DryRunResponse,
  ExpandedTokenResponse,
  OperatorPrimaryResponse,
  OperatorServersResponse,
  OperatorUpgradeResponse,
  PolicyResponse,
  PromotionResponse,
  QuotaResponse,
  ReplicationStatusResponse,
  RoleResponse,
  SnapshotRestoreResponse,
  SyntheticPolicyResponse,
  TemplatedPolicyResponse,
  TokenAuthorizerResponse,
  TokenResponse,
  TransferLeaderResponse,
  WhoCanResponse,
} from '../api/schemas.js';
export type { InventoryResponse } from '../api/status-schemas.js';

import type { Reason } from '../domain/rules/explain-types.js';

/** Filters of GET /v1/operator/audit. */
export interface AuditQuery {
  since?: string;
  until?: string;
  type?: string;
  accessor?: string;
  kind?: string;
  id?: string;
  limit?: number;
  cursor?: string;
  after?: number;
}

/** A page of audit events; `Latest` is the newest event's sequence number: `after` it to follow the log. */
export type { AuditPageResponse as AuditPage } from '../api/status-schemas.js';

/** One question for POST /v1/internal/acl/authorize (docs/enforcing-client.md, "Enforcing policies in your service"). */
export interface AuthorizationCheck {
  Resource: string;
  Segment?: string;
  Access: string;
  Namespace?: string;
  Partition?: string;
}

/** A check as answered: as asked, with Allow (and with `explain`, the Reason: the source and rule that decided, the rule that lost). */
export interface AuthorizationAnswer extends AuthorizationCheck {
  Allow: boolean;
  Reason?: Reason;
}

export interface ClientOptions {
  /** Base URL or host:port of a daemon; default WATCHWORD_HTTP_ADDR, else http://127.0.0.1:8500. */
  address?: string;
  /**
   * Token secret sent as X-Service-Token; default WATCHWORD_HTTP_TOKEN. `null`: no default
   * at all (a request without its own token is anonymous) and the environment is not read.
   */
  token?: string | null;
  namespace?: string;
  partition?: string;
  /** Send requests to this datacenter (?dc=). */
  datacenter?: string;
  /** Per-request timeout, ms (blocking reads add their wait). Default 30 s. */
  timeoutMs?: number;
  /**
   * HTTPS: the CA that signs the daemon's certificate, and a client certificate and key
   * (needed when the daemon has tls_verify_incoming). Files (default WATCHWORD_CACERT,
   * WATCHWORD_CLIENT_CERT, WATCHWORD_CLIENT_KEY) or PEM text.
   */
  tls?: ClientTLS;
  /**
   * Reads without their own consistency: `stale` lets any server answer (Consul's ?stale), `consistent` asks the
   * leader to confirm it leads.
   */
  consistency?: 'stale' | 'consistent';
  /** Connections kept to the daemon at most (requests beyond wait their turn); default: as many as needed. */
  maxConnections?: number;
}

export interface ClientTLS {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  ca?: string;
  cert?: string;
  key?: string;
  /** The name the daemon's certificate must carry, when the address does not (an IP, a load balancer): e.g. server.dc1.watchword. */
  serverName?: string;
}

export interface RequestOptions {
  token?: string;
  namespace?: string;
  partition?: string;
  datacenter?: string;
}

export interface QueryOptions extends RequestOptions {
  /** Blocking query: wait until the index exceeds this. */
  index?: number;
  /** Longest wait, a Go duration ("30s", "5m"). */
  wait?: string;
  consistency?: 'default' | 'stale' | 'consistent';
  /** Content-hash blocking: wait until the answer's hash differs from this one. */
  hash?: string;
  /** Abort the request when this signal does (besides the client's timeout). */
  signal?: AbortSignal;
  /** A paged list (tokens, policies, roles): at most this many items (1-10,000); `nextCursor` then says where the rest starts. */
  perPage?: number;
  /** The `nextCursor` of the previous page (with `perPage`). */
  cursor?: string;
}

/** A read's value with the index to block on next. */
export interface ReadResult<T> {
  value: T;
  index: number;
  knownLeader: boolean;
  lastContactMs: number;
  /** X-Service-ContentHash, on reads that block by content hash. */
  contentHash?: string;
  /** X-Service-Next-Cursor: a paged list has more after this page; pass it as `cursor` for the next. */
  nextCursor?: string;
}

/** The token list's filters (api/token-list-filter.ts declares them for both ends). */
export type { TokenListFilter } from '../api/token-list-filter.js';
