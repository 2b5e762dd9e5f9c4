// What the HTTP layer is built from: the services and settings buildApp receives. Each
// route plugin takes the few of these it uses (a Pick of AppDeps) as its options.
import type { AuditLog } from '../observability/audit.js';
import type { LagSample } from '../observability/replication-history.js';
import type { ServerOptions as HttpsServerOptions } from 'node:https';
import type { FastifyBaseLogger } from 'fastify';
import type { ReplicationStatusResponse } from '../api/schemas.js';
import type { Metrics } from '../observability/metrics.js';
import type { AclResolver } from '../service/acl-resolver.js';
import type { AuthMethodService } from '../service/auth-methods.js';
import type { BindingRuleService } from '../service/binding-rules.js';
import type { QuotaService } from '../service/quotas.js';
import type { InventoryService } from '../service/inventory.js';
import type { LoginService } from '../service/login.js';
import type { BootstrapService } from '../service/bootstrap.js';
import type { AgentInfo } from '../service/context.js';
import type { DecisionService } from '../service/decisions.js';
import type { WhoCanService } from '../service/who-can.js';
import type { DryRunService } from '../service/dry-run.js';
import type { PolicyService } from '../service/policies.js';
import type { RoleService } from '../service/roles.js';
import type { SnapshotService } from '../service/snapshots.js';
import type { TemplatedPolicyService } from '../service/templated-policies.js';
import type { TokenService } from '../service/tokens.js';
import type { Store } from '../store/store.js';
import type { ReadGate } from './blocking.js';
import type { ClusterHooks } from './forward.js';
import type { Refusal } from './errors.js';

export type { Refusal } from './errors.js';

export interface AppDeps {
  store: Store;
  tokens: TokenService;
  policies: PolicyService;
  roles: RoleService;
  templatedPolicies: TemplatedPolicyService;
  /** Authorization decisions for the request's token (docs/enforcing-client.md, "Enforcing policies in your service"). */
  decisions: DecisionService;
  /** Who may do something: the tokens and roles granted a check (docs/operator-insight.md, "Who can"). */
  whoCan: WhoCanService;
  /** What a policy or role change would flip of the checks recently asked (docs/operator-insight.md, "What a change would break"). */
  dryRun: DryRunService;
  authMethods: AuthMethodService;
  bindingRules: BindingRuleService;
  /** Quotas (docs/http-api.md, "Quotas"). */
  quotas: QuotaService;
  /** The inventory of tokens (docs/http-api.md, "Inventory"). */
  inventory: InventoryService;
  login: LoginService;
  bootstrap: BootstrapService;
  snapshots: SnapshotService;
  agent: AgentInfo;
  /** Resolves secrets to identities (permission checks outside the ACL services). */
  resolver: AclResolver;
  reads: ReadGate;
  metrics: Metrics;
  /** GET /v1/acl/replication. */
  replicationStatus: () => ReplicationStatusResponse;
  /**
   * At the primary, its epoch (docs/datacenters.md): a write forwarded by a secondary that has seen a higher
   * one is refused (409 STALE_PRIMARY). Undefined elsewhere, or when absent.
   */
  primaryEpoch?: () => number | undefined;
  /** Told when a forwarded write names a higher epoch than this primary's (it asks the others which primary is newer). */
  staleSeen?: () => void;
  /** This server's recent audit events (GET /v1/operator/audit). */
  audit?: Pick<AuditLog, 'query' | 'after' | 'latest'>;
  /** Records a refused request in the audit log (docs/audit.md: Audit log): 403s, and the login limit's 429s. */
  auditRefusal?: (refusal: Refusal) => void;
  /** Replication lag over the last hour (the web UI's chart). */
  replicationHistory?: () => { IntervalMs: number; Samples: LagSample[] };
  /** The daemon's place in the cluster: ?dc= forwarding and, on secondaries, write forwarding. */
  cluster?: ClusterHooks;
  /** Connection and request timeouts and caps; absent means Node's and Fastify's defaults. */
  limits?: HttpLimits;
  /**
   * Per-client request limit; absent means none. Requests a peer daemon forwards count
   * against the original client's bucket (X-Service-Forwarded-For) and against the
   * peer's own, larger `peerRate`.
   */
  rateLimit?: { rate: number; burst: number; peerRate: number; peerBurst: number };
  logger?: FastifyBaseLogger;
  /** Logins per second per client, with a burst (docs/security.md, "Security": on by default; rate 0 turns it off). */
  loginRate?: { rate: number; burst: number };
  /** Restores: the upload limit and where the file is kept while verified (default 512 MiB, the working directory). */
  snapshotUploads?: SnapshotUploads;
  /** TLS options of the listener (docs/tls.md, "TLS"): with them the API speaks HTTPS only. */
  https?: HttpsServerOptions;
}

/** How long clients may take and how many connections they may hold (all ms or counts). */

export interface HttpLimits {
  /** Whole request (headers and body) must arrive within this; waiting for a blocking answer does not count. */
  requestTimeout: number;
  /** Headers must arrive within this. */
  headerTimeout: number;
  keepAliveTimeout: number;
  /** Requests per keep-alive connection (0: no limit). */
  maxRequestsPerConn: number;
  /** Open connections at once. */
  maxConns: number;
  /** Open connections at once from one client address; more are closed at once (0: no cap). */
  maxConnsPerClient?: number;
}

/** What a restore's upload may be, and where it is kept while it is verified. */
export interface SnapshotUploads {
  /** Largest file accepted, bytes (snapshot_max_bytes). */
  maxBytes: number;
  /** Directory for the temporary file (the data dir: same disk, same 0700 permissions). */
  dir: string;
}
