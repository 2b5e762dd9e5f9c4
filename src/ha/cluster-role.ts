import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type {
  OperatorPrimaryResponse,
  OperatorServersResponse,
  PrimaryPlacementResponse,
  PromotionResponse,
  ReplicationStatusResponse,
  TransferLeaderResponse,
} from '../api/schemas.js';
import type { Placement } from '../replication/placement.js';
import type { Config } from '../config/schema.js';
import type { FollowerHooks, SecondaryHooks } from './hooks.js';
import type { Metrics } from '../observability/metrics.js';
import type { DatacenterInfo } from '../replication/protocol.js';
import { DEFAULT_PRIMARY_OPTIONS } from '../replication/primary.js';
import type { AclResolver } from '../service/acl-resolver.js';
import type { ClusterStore } from '../store/store.js';
import type { Transport } from '../transport/transport.js';
import type { ServerGroup } from './servers.js';
import type { AuditType } from '../domain/audit-types.js';
import type { ReleaseBook } from '../replication/releases.js';

/** Replication timings and sizes; tests shorten them. */
export const DEFAULT_REPLICATION_OPTIONS = {
  ...DEFAULT_PRIMARY_OPTIONS,
  backoffMinMs: 250,
  backoffMaxMs: 2000,
  /** How often a datacenter's leader asks the others whether a newer primary exists (docs/datacenters.md); 0: never. */
  primaryProbeMs: 5000,
};

export type ReplicationOptions = typeof DEFAULT_REPLICATION_OPTIONS;

/**
 * A server's place in the cluster (docs/datacenters.md, "Multiple datacenters" and "Several servers per datacenter"): primary or
 * secondary datacenter, and
 * leader or follower within its own. Services and the HTTP layer ask it, never the
 * configuration: where a write goes, what a consistent read waits for, who is asked
 * about a secret this server does not hold, and how replication stands.
 */
export interface ClusterRole {
  /** The datacenter's side now: it changes with a promotion, a handover, or a newer primary followed (docs/datacenters.md). */
  readonly kind: 'primary' | 'secondary';
  /** Several servers in this datacenter: the group (undefined for a single server). */
  readonly group: ServerGroup | undefined;
  /** The cluster's versions as this server knows them (docs/upgrading.md, "Upgrading"). */
  readonly releases: ReleaseBook;
  /** Starts what this role runs, with the parts it calls from then on; called once HTTP listens. */
  start(parts: RoleParts): Promise<void>;
  /** Gives up leadership first (so a successor need not wait), then stops replication. */
  stop(): Promise<void>;
  /** Whether this server leads its datacenter. */
  isLeader(): boolean;
  /** A write made at this server: undefined to apply here, or the leader to send it to. Throws NO_LEADER while none is known. */
  writeTarget(): FollowerHooks | undefined;
  /** On a secondary: global writes go to the primary (undefined on the primary). */
  readonly secondary: SecondaryHooks | undefined;
  /** `?consistent`: resolves once this server has what its leader (or primary) had when asked. */
  beforeConsistentRead?: () => Promise<void>;
  /** A secret this server does not hold: true once its token has arrived here. */
  lookupUnknownSecret?: (secret: string, client: string | undefined) => Promise<boolean>;
  /** On a secondary's replicating server: how long the primary has been silent, ms (replication_max_stale). */
  primarySilentForMs(): number | undefined;
  /** IDs chosen by a client for a new token must not be in use anywhere they would clash. */
  checkChosenIDs(ids: { accessor?: string; secret?: string }, local: boolean): Promise<void>;
  /** Last uses this server's flush wrote: a secondary's leader sends its global tokens' to the primary (docs/http-api.md, "Last use"). */
  usesWritten(uses: ReadonlyArray<readonly [string, number]>): void;
  replicationStatus(): ReplicationStatusResponse;
  /** Datacenters other daemons reported over replication. */
  reportedDatacenters(): DatacenterInfo[];
  knownLeader(): boolean;
  lastContactMs(): number;
  /** The leader's address ('' while none is known). */
  leaderAddress(): string;
  peers(): string[];
  servers(): OperatorServersResponse;
  /** The primary this server follows (GET /v1/operator/primary): its datacenter, epoch, the index applied here, when last heard. */
  primaryStatus(): OperatorPrimaryResponse;
  /** PUT /v1/operator/primary?promote at a secondary's leader (docs/datacenters.md): this datacenter becomes the primary. */
  promote(force: boolean): Promise<PromotionResponse>;
  /** PUT /v1/operator/primary?transfer=DC at the primary's leader (docs/datacenters.md): a planned handover. */
  transfer(target: string): Promise<PromotionResponse>;
  /** POST /v1/operator/raft/transfer-leader: this datacenter's leadership handed over (coordinator.ts, handOver). */
  transferLeader(to: string | undefined, by: string): Promise<TransferLeaderResponse>;
  /** Something named a higher epoch than this datacenter's (a forwarded write): ask the others which primary is newer, now. */
  staleSeen(): void;
  /** GET /v1/internal/primary: what peers learning of a newer primary are told. */
  placementAnswer(): PrimaryPlacementResponse;
  /** WebSocket upgrades: the replication stream and the servers' stream. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export interface RoleDeps {
  config: Config;
  /** Which datacenter is the primary, as the store says (docs/datacenters.md) or else the configuration. */
  placement: Placement;
  store: ClusterStore;
  metrics: Metrics;
  logger: Logger;
  replication: ReplicationOptions;
  /** How this server reaches and accepts its peers (TLS, identity checks). */
  transport: Transport;
  /** HA timings; tests shorten them. */
  serverTimings?: { pollMs?: number; syncTimeoutMs?: number };
  /** Where other servers and datacenters reach this one. */
  advertised(): string;
  /** Records an event in the audit log (leadership, replication connects and disconnects). */
  onEvent?: (type: AuditType, details: Record<string, unknown>) => void;
}

/**
 * What a role calls in the services, given when it starts (the services are built after the
 * role, from its lookUp and checkChosenIDs): nothing is bound late.
 */
export interface RoleParts {
  /** The primary authenticates secondaries' replication tokens with it. */
  resolver: AclResolver;
  /** This datacenter's view of an object the primary just wrote (secondaries' forwarded writes). */
  localView(kind: 'token' | 'policy' | 'role', id: string): unknown | undefined;
  /** What the leader runs besides replication (built-ins, the reaper); started and stopped with leadership. */
  leaderParts: { start(): Promise<void>; stop(): Promise<void> };
}
