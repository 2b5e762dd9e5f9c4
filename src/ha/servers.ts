import type { ServerStore } from '../store/store.js';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { OperatorServersResponse, ServerStatus } from '../api/schemas.js';
import { type ReleaseBook, type ServerRelease, selfRelease } from '../replication/releases.js';
import type { Coordinator, LeaderInfo } from './coordinator.js';
import { type FollowerOptions, ServerFollower } from './follower.js';
import type { LeaderSession, ServerChannel } from './leader-session.js';
import { type FollowerStatus, ServerLeader } from './leader.js';
import type { Transport } from '../transport/transport.js';

export interface ServerGroupOptions {
  name: string;
  datacenter: string;
  /** This server's HTTP address (host:port). */
  address: () => string;
  /** How servers reach and prove themselves to each other (never with an ACL token). */
  transport: Transport;
  syncFollowers: number;
  syncTimeoutMs: number;
  /** The coordinator's lease, ms: a leader that refuses this server for longer is reported. */
  leaseMs: number;
  heartbeatMs: number;
  deadPeerMs: number;
  backoffMinMs: number;
  backoffMaxMs: number;
  tailBatches: number;
  /** On a secondary datacenter: how long the primary has been silent, told to the followers while this server leads. */
  primarySilentForMs?: () => number | undefined;
  /** On a secondary datacenter: the leader this server follows reports the primary was last heard `ms` ago. */
  onPrimarySilence?: (ms: number) => void;
  logger: Logger;
  /** This server now leads: start what only the leader runs (replication, reaper). */
  onLead(term: number): Promise<void>;
  /** This server no longer leads: stop it again. */
  onFollow(): Promise<void>;
  /** Makes the stream to a leader (default: over a WebSocket; the simulation uses its own channels). */
  follower?: (store: ServerStore, options: FollowerOptions) => FollowerLink;
  /** The cluster's versions: told down by the leader, and kept by a follower. */
  releases?: ReleaseBook;
}

/** What the group uses of its stream to the leader. */
export type FollowerLink = Pick<ServerFollower, 'start' | 'stop' | 'isProven' | 'status' | 'holdsLeaderLog' | 'current'>;

/** The stream to the leader a write was sent to it over: its answer's index is compared with what comes over that stream. */
export interface LeaderMark {
  following: object;
  connection: number;
  /** The server protocol agreed with that leader. */
  version: number;
}

/**
 * A server's part in its datacenter (docs/servers.md, "Several servers per datacenter"): follows what the coordinator says,
 * becoming leader (batches copied to the followers, synchronous set kept) or follower
 * (streaming the leader's batches into its store, refusing local writes).
 */
export class ServerGroup {
  private role: 'leader' | 'follower' = 'follower';
  private leading: ServerLeader | undefined;
  private following: { stream: FollowerLink; term: number; url: string } | undefined;
  private chain: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly store: ServerStore,
    readonly coordinator: Coordinator,
    private readonly options: ServerGroupOptions,
  ) {}

  async start(): Promise<void> {
    this.store.setFollower(true);
    this.coordinator.onChange(() => void this.reconcile());
    await this.coordinator.start();
    await this.reconcile();
  }

  /** On a secondary datacenter: the primary was just heard; while this server leads, its followers are told. */
  relayPrimaryContact(): void {
    if (this.role === 'leader') this.leading?.relayPrimaryContact();
  }

  isLeader(): boolean {
    return this.role === 'leader';
  }

  leader(): LeaderInfo | undefined {
    return this.coordinator.leader();
  }

  /** The leader, when another server leads (not this one, nor this one's stale record of itself). */
  otherLeader(): LeaderInfo | undefined {
    const l = this.coordinator.leader();
    return l && l.name !== this.options.name ? l : undefined;
  }

  /**
   * The leader as this server may name it to others (421's X-Service-Leader, /v1/status/leader,
   * operator servers): only once this server's stream to it has proven, on the connection now
   * open, that it is a server of this datacenter (its certificate or the server key). A key in
   * etcd alone names nobody: whoever can write there cannot make this server point a secondary,
   * and its replication token, at an impostor.
   */
  provenLeader(): LeaderInfo | undefined {
    const l = this.otherLeader();
    if (!l) return undefined;
    const f = this.following;
    return f !== undefined && f.url === this.options.transport.peerURL(l.address) && f.stream.isProven() ? l : undefined;
  }

  /**
   * The leader's HTTP base URL, when another server leads and may be sent requests: over
   * TLS its certificate is checked on every connection; without TLS only once this
   * server's stream to it has proven it holds the server key.
   */
  leaderURL(): string | undefined {
    const l = this.otherLeader();
    if (!l) return undefined;
    const url = this.options.transport.peerURL(l.address);
    if (this.options.transport.secure) return url;
    return this.following?.url === url && this.following.stream.isProven() ? url : undefined;
  }

  /**
   * Whether an index the leader answered can be compared with this server's own: it leads,
   * or its stream has made its store a prefix of the leader's batch log. A follower that holds
   * batches of another batch log (a batch its leader refused, an older term's) has indexes the
   * leader may hand out again for other writes, so "reached index N" would prove nothing.
   */
  holdsLeaderLog(): boolean {
    if (this.role === 'leader') return true;
    const f = this.following;
    return f !== undefined && f.url === this.leaderURL() && f.stream.holdsLeaderLog();
  }

  /** The stream to the leader now, when it is live (see LeaderMark). */
  leaderMark(): LeaderMark | undefined {
    const f = this.following;
    const c = f?.stream.current();
    return f && c ? { following: f, ...c } : undefined;
  }

  /** Whether the stream of `mark` is gone: the leader changed, or the connection to it ended. */
  markEnded(mark: LeaderMark): boolean {
    const f = this.following;
    return f !== mark.following || f.stream.current()?.connection !== mark.connection;
  }

  /** Brings this server's part in line with the coordinator; one change at a time. */
  reconcile(): Promise<void> {
    this.chain = this.chain
      .then(() => this.step())
      .catch((err: unknown) => this.options.logger.error({ err }, 'servers: cannot take up the role the coordinator names'));
    return this.chain;
  }

  private async step(): Promise<void> {
    if (this.stopped) return;
    const leader = this.coordinator.leader();
    if (this.coordinator.isLeader() && leader) {
      if (this.role !== 'leader' || this.leading?.term() !== leader.term) await this.lead(leader.term);
      return;
    }
    if (this.role === 'leader') await this.stepDown();
    if (leader && leader.name !== this.options.name) {
      const url = this.options.transport.peerURL(leader.address);
      if (!this.following || this.following.term !== leader.term || this.following.url !== url) await this.follow(url, leader, leader.term);
    }
  }

  private async lead(term: number): Promise<void> {
    await this.following?.stream.stop();
    this.following = undefined;
    await this.leading?.close();
    const o = this.options;
    this.leading = new ServerLeader(this.store, {
      name: o.name,
      address: o.address,
      term,
      syncFollowers: o.syncFollowers,
      syncTimeoutMs: o.syncTimeoutMs,
      heartbeatMs: o.heartbeatMs,
      deadPeerMs: o.deadPeerMs,
      tailBatches: o.tailBatches,
      publishSync: (members) => this.coordinator.publishSync(members),
      checkLeadership: () => this.coordinator.checkLeadership(),
      datacenter: o.datacenter,
      transport: o.transport,
      isKnownServer: (name) => this.coordinator.servers().some((s) => s.name === name),
      ...(o.primarySilentForMs ? { primarySilentForMs: o.primarySilentForMs } : {}),
      ...(o.releases ? { releases: o.releases } : {}),
      logger: o.logger,
    });
    this.store.setReplicator(this.leading);
    this.store.setFollower(false);
    this.role = 'leader';
    o.logger.info({ term }, 'servers: this server leads its datacenter');
    await o.onLead(term);
  }

  private async stepDown(): Promise<void> {
    this.role = 'follower';
    this.options.logger.warn('servers: this server no longer leads; writes go to the new leader');
    // Refused from here on: nothing more is acknowledged by this server.
    const leading = this.leading;
    this.leading = undefined;
    this.store.setFollower(true);
    await leading?.close();
    await this.store.quiesce();
    this.store.setReplicator(undefined);
    await this.options.onFollow();
  }

  private async follow(url: string, leader: { name: string; address: string }, term: number): Promise<void> {
    await this.following?.stream.stop();
    const o = this.options;
    const make = o.follower ?? ((store: ServerStore, options: FollowerOptions) => new ServerFollower(store, options));
    const stream = make(this.store, {
      name: o.name,
      datacenter: o.datacenter,
      address: o.address,
      leaderURL: url,
      leader,
      term,
      transport: o.transport,
      heartbeatMs: o.heartbeatMs,
      deadPeerMs: o.deadPeerMs,
      backoffMinMs: o.backoffMinMs,
      backoffMaxMs: o.backoffMaxMs,
      logger: o.logger,
      ...(o.onPrimarySilence ? { onPrimarySilence: o.onPrimarySilence } : {}),
      ...(o.releases ? { releases: o.releases } : {}),
    });
    this.following = { stream, term, url };
    stream.start();
    o.logger.info({ leader: url, term }, 'servers: following the leader');
  }

  /**
   * A follower's stream on a channel of the caller's (the simulation's in-memory links; a
   * WebSocket upgrade goes through handleUpgrade): undefined unless this server leads.
   */
  openFollowerStream(channel: ServerChannel, name: string): LeaderSession | undefined {
    return this.leading && this.role === 'leader' ? this.leading.open(channel, name) : undefined;
  }

  /** The leader's stream route; a follower names its leader instead. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, refuse: (status: number, message: string) => void): void {
    if (this.leading && this.role === 'leader') return this.leading.handleUpgrade(req, socket, head, refuse);
    const l = this.provenLeader();
    refuse(
      421,
      l ? `this server is a follower; the leader is ${l.name} at ${l.address}` : 'this server is a follower and no leader is known',
    );
  }

  /** Each server of the datacenter as this server sees it (complete on the leader). */
  status(): Omit<OperatorServersResponse, 'Datacenter'> {
    // The leader as far as this server can vouch for it: itself, or one its stream has proven.
    const named = this.coordinator.leader();
    const leader = this.role === 'leader' ? named : this.provenLeader();
    const mine = this.store.serverPosition();
    const servers = new Map<string, ServerStatus>();
    const live = new Set(this.coordinator.servers().map((s) => s.name));
    for (const s of this.coordinator.knownServers()) {
      servers.set(s.name, {
        Name: s.name,
        Address: s.address,
        Role: s.name === leader?.name ? 'leader' : 'follower',
        Term: leader?.term ?? 0,
        AppliedSeq: 0,
        AppliedIndex: null,
        LagBatches: 0,
        InSyncSet: false,
        Connected: false,
        Registered: live.has(s.name),
        Release: null,
        Protocols: null,
      });
    }
    const sync = this.leading?.syncSet() ?? this.coordinator.syncSet();
    const self: ServerStatus = {
      Name: this.options.name,
      Address: this.options.address(),
      Role: this.role,
      Term: leader?.term ?? 0,
      AppliedSeq: mine.seq,
      AppliedIndex: this.store.currentIndex(),
      LagBatches: 0,
      InSyncSet: sync.includes(this.options.name),
      Connected: true,
      Registered: live.has(this.options.name),
      ...releaseColumns(selfRelease(this.options.name)),
    };
    if (this.following) {
      const f = this.following.stream.status();
      self.LagBatches = Math.max(0, f.LeaderSeq - f.AppliedSeq);
      self.Connected = f.Connected;
    }
    servers.set(self.Name, self);
    for (const f of this.leading?.followers() ?? []) {
      servers.set(f.Name, followerRow(f, leader?.term ?? 0, live.has(f.Name)));
    }
    return {
      Leader: leader ? leader.address : null,
      Term: leader?.term ?? 0,
      SyncSet: sync,
      RunningWithoutSyncCopy: this.role === 'leader' && sync.length === 0,
      Problem: this.problem() ?? null,
      Servers: [...servers.values()].sort((a, b) => a.Name.localeCompare(b.Name)),
      AnsweredBy: this.options.name,
    };
  }

  /**
   * What keeps the datacenter from a working leader as this server sees it. A leader that
   * the coordinator names but that refuses this server's stream for longer than a lease is
   * the symptom of a leader key outliving its leadership, so it is reported, not only logged.
   */
  problem(): string | undefined {
    const trouble = this.coordinator.problem();
    if (trouble) return `this server ${trouble}`;
    const f = this.following?.stream.status();
    const leader = this.otherLeader();
    if (f && leader && f.RefusedForMs > this.options.leaseMs) {
      return (
        `the leader named in the coordinator (${leader.name}) has refused this server's stream for ` +
        `${Math.round(f.RefusedForMs / 1000)} s: ${f.LastError}`
      );
    }
    return undefined;
  }

  /** The follower stream's own status, on a follower. */
  followerStatus(): ReturnType<ServerFollower['status']> | undefined {
    return this.following?.stream.status();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    // Refused from here on, as a follower refuses them: a server that has stopped leading is not a
    // lone server, and whatever it took now its successor would never hold.
    this.store.setFollower(true);
    await this.chain;
    this.store.setFollower(true);
    await this.following?.stream.stop();
    await this.leading?.close();
    await this.store.quiesce();
    this.store.setReplicator(undefined);
    await this.coordinator.stop();
  }
}

/** A server's release and protocols as the servers' view shows them. */
export function releaseColumns(r: ServerRelease): Pick<ServerStatus, 'Release' | 'Protocols'> {
  return { Release: r.Release, Protocols: r.Replication && r.Servers ? { Replication: r.Replication, Servers: r.Servers } : null };
}

function followerRow(f: FollowerStatus, term: number, registered: boolean): ServerStatus {
  return {
    ...releaseColumns(f.Release),
    Name: f.Name,
    Address: f.Address,
    Role: 'follower',
    Term: term,
    AppliedSeq: f.AckedSeq,
    AppliedIndex: null,
    LagBatches: f.LagBatches,
    InSyncSet: f.InSyncSet,
    Connected: f.Streaming,
    Registered: registered,
  };
}
