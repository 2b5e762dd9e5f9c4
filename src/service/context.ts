import type {
  OperatorPrimaryResponse,
  OperatorServersResponse,
  PrimaryPlacementResponse,
  PromotionResponse,
  OperatorUpgradeResponse,
  TransferLeaderResponse,
} from '../api/schemas.js';
import type { ScopeHints } from './scope.js';

/** What every use case gets from the edge: who is asking, and where they point. */
export interface RequestContext {
  /** The request's secret (`?token=`, `X-Service-Token`, aliases); undefined for none. */
  secret?: string;
  /** Namespace/partition from query or headers. */
  hints: ScopeHints;
  /** The client's address (per-client limits; for a request a peer forwarded, the original client's). */
  client?: string;
  /** The request itself, for its audit line: id, method, path (query without `token`), client address. */
  request?: { id: string; method: string; path: string; remote: string; via?: string };
}

/** A write's result and the index of its change (sent as X-Service-Index). */
export interface WriteResult<T> {
  value: T;
  index: number;
}

/** One health check: its name, whether it passes, and why not (the why only for agent:read). */
export interface HealthCheck {
  Name: string;
  Passing: boolean;
  Output: string;
}

/** Facts about the daemon that responses report. */
export interface AgentInfo {
  datacenter: string;
  primaryDatacenter: string;
  nodeName: string;
  /** Version of this build. */
  version: string;
  defaultPolicy: 'allow' | 'deny';
  /** What a secondary does when the primary is unreachable (reported, as Consul does). */
  downPolicy: string;
  /** This daemon's HTTP address (host:port) once listening. */
  address(): string;
  /** Known datacenters, primary first. */
  datacenters(): string[];
  /** The agent's self-description: configuration without secrets, version, role; where etcd is only for `operator:read`. */
  self(operatorRead: boolean): unknown;
  /** True on the primary, or on a secondary connected to it. */
  knownLeader(): boolean;
  /** Milliseconds since the last contact with the primary; 0 on the primary. */
  lastContactMs(): number;
  /** Whether this server can do its job, check by check (GET /v1/agent/health). */
  health(): HealthCheck[];
  /** Whether this server leads its datacenter (a single server always does). */
  isLeader(): boolean;
  /** Address of this datacenter's leader ('' while none is known). */
  leaderAddress(): string;
  /** Addresses of this datacenter's servers. */
  peers(): string[];
  /** Each server of this datacenter: role, term, applied index, lag, synchronous set. */
  servers(): OperatorServersResponse;
  /** The primary this server follows: its datacenter, epoch, the index applied here, when last heard. */
  primary(): OperatorPrimaryResponse;
  /** This secondary datacenter becomes the primary (docs/datacenters.md, emergency promotion); at its leader. */
  promote(force: boolean): Promise<PromotionResponse>;
  /** The primary hands its role to a connected secondary (docs/datacenters.md, planned transfer); at its leader. */
  transfer(target: string): Promise<PromotionResponse>;
  /** POST /v1/operator/raft/transfer-leader: this datacenter's leadership handed to `to` (or a synchronous follower). */
  transferLeader(to: string | undefined, by: string): Promise<TransferLeaderResponse>;
  /** What a peer asking which primary this datacenter follows is told. */
  placement(): PrimaryPlacementResponse;
  /** GET /v1/operator/upgrade: every server's release and versions, what finalize would set, what waits. */
  upgrade(): OperatorUpgradeResponse;
  /** PUT /v1/operator/upgrade?finalize, at the primary's leader. */
  finalize(): Promise<OperatorUpgradeResponse>;
}
