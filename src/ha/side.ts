import type { ReleaseBook } from '../replication/releases.js';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { OperatorPrimaryResponse, ReplicationStatusResponse } from '../api/schemas.js';
import type { DatacenterInfo } from '../replication/protocol.js';
import type { PrimaryContact } from '../replication/primary-contact.js';
import type { PeerClient } from '../transport/peer-client.js';
import type { RoleDeps, RoleParts } from './cluster-role.js';
import type { SecondaryHooks } from './hooks.js';
import type { SecretLookup } from './secret-lookup.js';
import type { ServerGroup } from './servers.js';

/**
 * What a side (primary or secondary datacenter) uses of the server's role: its datacenter's
 * servers and leader, which outlive every change of side (docs/datacenters.md: a promotion, a handover, a
 * newer primary followed).
 */
export interface RoleHost {
  readonly deps: RoleDeps;
  /** Several servers in this datacenter. */
  readonly several: boolean;
  readonly group: ServerGroup | undefined;
  readonly lookups: SecretLookup;
  /** When the primary was last heard (a secondary's): one clock per server, kept across sides. */
  readonly contact: PrimaryContact;
  /** The cluster's versions as this server knows them. */
  readonly releases: ReleaseBook;
  ports(): RoleParts;
  leaderClient(): PeerClient | undefined;
  waitForLocalIndex(index: number, timeoutMs: number): Promise<boolean>;
  /** `?consistent` at a follower: through its leader (true when it did). */
  throughLeader(): Promise<boolean>;
  /** The header naming the leader on a follower's refusals. */
  leaderHeader(): Record<string, string>;
  /** A planned transfer from `from`: this datacenter becomes the primary with `epoch` (it has applied up to `upTo`). */
  takeHandover(from: string, epoch: number, upTo: number): void;
}

/** The part of a server's role that depends on whether its datacenter is the primary or a secondary. */
export interface Side {
  readonly kind: 'primary' | 'secondary';
  readonly secondary: SecondaryHooks | undefined;
  readonly beforeConsistentRead: (() => Promise<void>) | undefined;
  readonly lookupUnknownSecret: ((secret: string, client: string | undefined) => Promise<boolean>) | undefined;
  /** The leader's replication: started when this server leads (or when its datacenter changes side while it does). */
  startReplication(): Promise<void>;
  stopReplication(): Promise<void>;
  checkChosenIDs(ids: { accessor?: string; secret?: string }, local: boolean): Promise<void>;
  usesWritten(uses: ReadonlyArray<readonly [string, number]>): void;
  primarySilentForMs(): number | undefined;
  /** How long the primary has been silent as this server knows it, told to its followers while it leads (a secondary). */
  replicatingSilence(): number | undefined;
  /** The leader this server follows says the primary was heard `ms` ago (a secondary). */
  heardOfPrimary(ms: number): void;
  replicationStatus(): ReplicationStatusResponse;
  reportedDatacenters(): DatacenterInfo[];
  knownLeader(): boolean;
  lastContactMs(): number;
  primaryStatus(): OperatorPrimaryResponse;
  /** A planned transfer (the primary's): `target` gets everything up to `upTo`, then the role; its address, or undefined. */
  handOver?(target: string, epoch: number, upTo: number, timeoutMs: number): Promise<string | undefined>;
  /** The last primary index applied here and whether the primary is heard now (a secondary's promotion report). */
  followed?(): { index: number; connected: boolean };
  upgradeReplication(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

const ZERO_TIME = '0001-01-01T00:00:00Z';

/** GET /v1/acl/replication where this server does not replicate (the primary, or a follower). */
export function notReplicating(
  { config, store }: RoleDeps,
  secondaries: NonNullable<ReplicationStatusResponse['Secondaries']>,
): ReplicationStatusResponse {
  const index = store.currentIndex();
  return {
    Enabled: false,
    Running: false,
    SourceDatacenter: config.datacenter,
    ReplicationType: 'tokens',
    ReplicatedIndex: index,
    ReplicatedRoleIndex: index,
    ReplicatedTokenIndex: index,
    LastSuccess: ZERO_TIME,
    LastError: ZERO_TIME,
    LastErrorMessage: '',
    Connected: false,
    PrimaryIndex: index,
    LagEntries: 0,
    LastContactMs: 0,
    Secondaries: secondaries,
  };
}

/** Whether a replication status says the primary was ever heard. */
export const heardEver = (status: ReplicationStatusResponse): boolean => status.Connected || status.LastSuccess !== ZERO_TIME;
