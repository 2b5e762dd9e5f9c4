import { pino } from 'pino';
import type { LeaderSession, ServerChannel } from '../../ha/leader-session.js';
import type { FollowerOptions, FollowerStreamStatus } from '../../ha/follower.js';
import { FollowerStream } from '../../ha/follower-stream.js';
import { type FollowerFrame, type LeaderFrame, leaderFrame } from '../../ha/server-protocol.js';
import type { FollowerLink, ServerGroup } from '../../ha/servers.js';
import { Heartbeat } from '../../transport/heartbeat.js';
import { SERVER_PROTOCOL } from '../../version.js';
import { decodeFrame, encodeFrame } from '../../replication/protocol.js';
import type { ServerStore } from '../../store/store.js';
import type { Random } from './random.js';
import type { SimStore } from './sim-store.js';

// The simulated network between a datacenter's servers (datacenter.ts): links that deliver
// frames in order after a delay, and a follower's stream over them.

const logger = pino({ level: 'silent' });

/** What links and followers need of the simulated datacenter. */
export interface Network {
  readonly random: Random;
  readonly links: Set<Link>;
  /** One way across the network, ms. */
  delay(): number;
  serverAt(address: string): Server | undefined;
  reachable(a: Server, b: Server): boolean;
  /** A leader reached a moment a trap may be set for. */
  sprung(server: Server, on: 'batch' | 'snapshot'): void;
}

export interface Server {
  readonly name: string;
  readonly address: string;
  alive: boolean;
  incarnation: number;
  store: SimStore;
  group: ServerGroup | undefined;
}

/** A connection from a follower to its leader; frames each way arrive in order, after a delay. */
export class Link {
  closed = false;
  session: LeaderSession | undefined;
  private lastToFollower = 0;
  private lastToLeader = 0;

  constructor(
    private readonly sim: Network,
    readonly follower: Server,
    readonly leader: Server,
    private readonly onFollowerFrame: (frame: LeaderFrame) => void,
    private readonly onClosed: (reason: string) => void,
  ) {}

  /** Leader -> follower, as bytes on the wire (decoded and checked at the other end). */
  toFollower(frame: LeaderFrame): void {
    if (this.closed) return;
    const bytes = encodeFrame(frame);
    this.lastToFollower = Math.max(this.lastToFollower, Date.now() + this.sim.delay());
    setTimeout(() => {
      if (!this.closed) this.onFollowerFrame(decodeFrame(leaderFrame, bytes));
    }, this.lastToFollower - Date.now());
  }

  toLeader(frame: FollowerFrame): void {
    if (this.closed) return;
    const bytes = encodeFrame(frame);
    this.lastToLeader = Math.max(this.lastToLeader, Date.now() + this.sim.delay());
    setTimeout(() => {
      if (!this.closed) this.session?.receive(bytes);
    }, this.lastToLeader - Date.now());
  }

  /** Both ends learn of the close after a delay. */
  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    const session = this.session;
    setTimeout(() => session?.end(), this.sim.delay());
    setTimeout(() => this.onClosed(reason), this.sim.delay());
  }
}

/** A follower's stream to its leader over the simulation's links (the real one is follower.ts over a WebSocket). */
export class SimFollower implements FollowerLink {
  private link: Link | undefined;
  private stopped = false;
  private proven = false;
  private retry: NodeJS.Timeout | undefined;
  private lastError = '';
  private readonly stream: FollowerStream;
  private readonly heartbeat: Heartbeat;

  constructor(
    private readonly sim: Network,
    private readonly self: Server,
    store: ServerStore,
    private readonly options: FollowerOptions,
  ) {
    this.stream = new FollowerStream(
      store,
      { name: options.name, address: options.address, term: options.term, logger },
      {
        send: (frame) => this.link?.toLeader(frame),
        drop: (reason) => this.drop(reason),
        welcomed: () => undefined,
      },
    );
    this.heartbeat = new Heartbeat({
      everyMs: options.heartbeatMs,
      deadAfterMs: options.deadPeerMs,
      beat: () => this.link?.toLeader({ t: 'ping', time: Date.now() }),
      silent: () => this.drop('the leader went silent'),
    });
  }

  start(): void {
    this.connect();
  }

  private connect(): void {
    if (this.stopped) return;
    const leader = this.sim.serverAt(this.options.leader.address);
    if (!leader || leader.name !== this.options.leader.name || !this.sim.reachable(this.self, leader))
      return this.later('the leader cannot be reached');
    const link = new Link(
      this.sim,
      this.self,
      leader,
      (frame) => this.receive(link, frame),
      (reason) => this.closed(link, reason),
    );
    const channel: ServerChannel = {
      send: (frame) => {
        if (frame.t === 'welcome' && frame.mode === 'snapshot') this.sim.sprung(leader, 'snapshot');
        link.toFollower(frame);
      },
      bufferedAmount: () => 0,
      close: (_code, reason) => link.close(reason),
    };
    const session = leader.group?.openFollowerStream(channel, this.self.name);
    if (!session) return this.later('refused: not the leader');
    link.session = session;
    this.sim.links.add(link);
    this.link = link;
    this.proven = true;
    this.heartbeat.start();
    link.toLeader(this.stream.hello());
  }

  private receive(link: Link, frame: LeaderFrame): void {
    if (link !== this.link) return;
    this.heartbeat.heard();
    this.stream.receive(frame);
  }

  private closed(link: Link, reason: string): void {
    if (link === this.link) this.drop(reason);
  }

  private drop(reason: string): void {
    const link = this.link;
    this.link = undefined;
    this.proven = false;
    this.heartbeat.stop();
    this.stream.disconnected();
    link?.close(reason);
    this.later(reason);
  }

  private later(reason: string): void {
    this.lastError = reason;
    if (this.stopped) return;
    clearTimeout(this.retry);
    this.retry = setTimeout(() => this.connect(), 50 + this.sim.random.int(250));
  }

  isProven(): boolean {
    return this.proven;
  }

  current(): { connection: number; version: number } | undefined {
    return this.proven ? { connection: this.stream.connection, version: SERVER_PROTOCOL.max } : undefined;
  }

  holdsLeaderLog(): boolean {
    return this.proven && this.stream.holdsLeaderLog();
  }

  status(): FollowerStreamStatus {
    return {
      Leader: this.options.leaderURL,
      Connected: this.link !== undefined,
      LeaderSeq: this.stream.leaderSeq,
      AppliedSeq: 0,
      LastContactMs: 0,
      LastError: this.lastError,
      RefusedForMs: 0,
    };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    this.heartbeat.stop();
    this.link?.close('stopped');
    this.link = undefined;
    this.stream.stop();
  }
}
