import type { WebSocket } from 'ws';
import type { Logger } from 'pino';
import type { ServerBatch, ServerPosition, ServerStore } from '../store/store.js';
import { Heartbeat } from '../transport/heartbeat.js';
import { type FrameError, decodeFrame, encodeFrame } from '../replication/protocol.js';
import { type FollowerFrame, type LeaderFrame, SERVER_PROTOCOL_VERSION, followerFrame } from './server-protocol.js';
import { type ReleaseBook, type ServerRelease, previousRelease } from '../replication/releases.js';

/**
 * The leader's end of one follower's stream (docs/servers.md, "Several servers per datacenter"), without a socket: fed the
 * follower's frames (`receive`), it sends what the follower lacks (a snapshot, or the
 * batches after its position), then every batch as it is written, and tells the leader
 * what the follower confirmed. The WebSocket is one channel (wsServerChannel); tests use
 * an array (test/ha/leader-session.test.ts).
 */

/** Where a session's frames go. */
export interface ServerChannel {
  /** Sends a frame (dropped once the channel is closed). */
  send(frame: LeaderFrame): void;
  /** Bytes sent but not yet on the wire (flow control for snapshots). */
  bufferedAmount(): number;
  close(code: number, reason: string): void;
}

/** A WebSocket as a session's channel, its frames and close fed to the session. */
export function wsServerChannel(ws: WebSocket, session: () => LeaderSession | undefined): ServerChannel {
  ws.on('message', (data) => session()?.receive(data));
  ws.on('close', () => session()?.end());
  ws.on('error', () => undefined);
  return {
    send: (frame) => {
      if (ws.readyState === ws.OPEN) ws.send(encodeFrame(frame));
    },
    bufferedAmount: () => ws.bufferedAmount,
    close: (code, reason) => ws.close(code, reason),
  };
}

/** What a session needs of the leader it belongs to (the leader implements it; the session never sees the rest). */
export interface LeaderHost {
  readonly options: {
    readonly name: string;
    readonly heartbeatMs: number;
    readonly deadPeerMs: number;
    readonly primarySilentForMs?: (() => number | undefined) | undefined;
    readonly logger: Logger;
    /** The cluster's versions as this leader knows them: sent to followers that speak version 3. */
    readonly releases?: ReleaseBook | undefined;
  };
  readonly store: Pick<ServerStore, 'serverSnapshot' | 'lastUse'>;
  term(): number;
  lastSeq(): number;
  /** The last batch acknowledged (committed): followers show batches up to it. */
  committedSeq(): number;
  /** The batches after a position, or undefined when they are no longer kept. */
  batchesAfter(pos: ServerPosition): ServerBatch[] | undefined;
  /** Batches handed out whose write on this server has not finished: a snapshot taken now lacks them. */
  unwritten(): ServerBatch[];
  /** A follower confirmed a batch: the leader reviews its waiters. */
  acked(): void;
  /** The session ended. */
  forget(session: LeaderSession): void;
}

/** One follower's stream, at the leader (the leader's end of it). */
export class LeaderSession {
  /** The name the follower proved on the upgrade (its hello must say the same). */
  readonly name: string;
  /** The follower's release and the versions it speaks: told in a `release` frame (version 3), else 0.1.0's. */
  release: ServerRelease;
  address = '';
  greeted = false;
  ackedSeq = -1;
  lastAckAt = Date.now();
  /** Live: each new batch is sent as it is written. Before that the session catches up. */
  streaming = false;
  /** Batches written while the session catches up, sent once it has. */
  private held: ServerBatch[] = [];
  private closed = false;
  readonly heartbeat: Heartbeat;

  constructor(
    private readonly leader: LeaderHost,
    private readonly channel: ServerChannel,
    name: string,
    /** The protocol version agreed at the upgrade: nothing is sent that it does not carry. */
    readonly version: number = SERVER_PROTOCOL_VERSION,
  ) {
    this.name = name;
    this.release = version < 3 ? previousRelease(name) : { Name: name, Release: null, Replication: null, Servers: null };
    const { heartbeatMs, deadPeerMs } = leader.options;
    this.heartbeat = new Heartbeat({
      everyMs: heartbeatMs,
      deadAfterMs: deadPeerMs,
      beat: () => this.ping(),
      silent: () => this.close(4008, `no frame from the follower for ${deadPeerMs} ms`),
    });
    this.heartbeat.start();
  }

  private ping(): void {
    this.tellCluster();
    const silent = this.leader.options.primarySilentForMs?.();
    this.send({
      t: 'ping',
      time: Date.now(),
      seq: this.leader.lastSeq(),
      commit: this.leader.committedSeq(),
      ...(silent !== undefined ? { silent } : {}),
    });
  }

  /** The cluster's picture as last sent to this follower (its revision). */
  private clusterSent = '';

  /** Sends the cluster's picture when it moved since this follower last had it (version 3 and later). */
  private tellCluster(): void {
    const book = this.leader.options.releases;
    if (book === undefined || this.version < 3 || !this.greeted) return;
    const revision = book.revision();
    if (revision === this.clusterSent) return;
    this.clusterSent = revision;
    this.send({ t: 'cluster', picture: book.picture() });
  }

  /** When the primary's contact was last relayed (pings also go out with each heartbeat). */
  private relayedAt = 0;

  /**
   * The primary was just heard (a secondary's leader): tell the follower now rather than at the
   * next heartbeat, which could put a whole heartbeat on top of the primary's own in the
   * follower's replication_max_stale clock. At most four times a heartbeat while writes stream.
   */
  relayPrimaryContact(): void {
    const now = Date.now();
    if (now - this.relayedAt < this.leader.options.heartbeatMs / 4) return;
    this.relayedAt = now;
    this.ping();
  }

  private send(frame: LeaderFrame): void {
    if (!this.closed) this.channel.send(frame);
  }

  offer(batch: ServerBatch): void {
    if (this.streaming) this.sendBatch(batch);
    else if (this.greeted) this.held.push(batch);
  }

  /** A batch, with how far the leader has committed. */
  private sendBatch(batch: ServerBatch): void {
    this.send({ t: 'batch', ...batch, commit: this.leader.committedSeq() });
  }

  /** Batches up to `seq` were committed since the last frame said so. */
  tellCommitted(seq: number): void {
    if (this.streaming) this.send({ t: 'ping', time: Date.now(), seq: this.leader.lastSeq(), commit: seq });
  }

  /** A frame from the follower, as it arrived (decoded and checked here). */
  receive(data: unknown): void {
    this.heartbeat.heard();
    let frame: FollowerFrame;
    try {
      frame = decodeFrame(followerFrame, data);
    } catch (err) {
      this.leader.options.logger.warn({ err: (err as FrameError).message }, 'server stream: malformed frame from a follower; closing');
      return this.close(4002, (err as Error).message);
    }
    if (frame.t === 'ping') return;
    if (frame.t === 'release') {
      this.release = { ...frame.server, Name: this.name };
      return;
    }
    if (frame.t === 'uses') {
      // A follower's uses: this leader keeps the latest and writes them with its own.
      for (const [id, ms] of frame.uses) this.leader.store.lastUse.merge(id, ms);
      return;
    }
    if (frame.t === 'ack') {
      if (frame.seq > this.ackedSeq) {
        this.ackedSeq = frame.seq;
        this.lastAckAt = Date.now();
      }
      this.leader.acked();
      return;
    }
    if (this.greeted) return this.close(4002, 'hello sent twice');
    if (frame.v !== this.version)
      return this.fail('VERSION', `the follower's hello speaks server protocol ${frame.v}, not ${this.version} as agreed at its upgrade`);
    if (frame.name !== this.name) return this.fail('NAME', `the hello names ${frame.name}, but this connection proved ${this.name}`);
    this.greeted = true;
    this.address = frame.address;
    void this.catchUp({ seq: frame.seq, term: frame.term });
  }

  /** Sends what the follower lacks: the batches after its position, or a snapshot and the batches after it. */
  private async catchUp(from: ServerPosition): Promise<void> {
    const { leader } = this;
    const after = leader.batchesAfter(from);
    try {
      if (after) {
        // Its position is in this leader's batch log: it holds every batch up to it. A position
        // from another batch log (a batch this leader refused, or an older term's) confirms
        // nothing here: counting it would let writes be acknowledged, and the follower join
        // the synchronous set, on batches it does not hold; it confirms the snapshot instead.
        this.ackedSeq = from.seq;
        this.send({ t: 'welcome', v: this.version, term: leader.term(), leader: leader.options.name, mode: 'tail' });
        for (const b of after) this.sendBatch(b);
        this.goLive(after[after.length - 1]?.seq ?? from.seq);
        return;
      }
      this.send({ t: 'welcome', v: this.version, term: leader.term(), leader: leader.options.name, mode: 'snapshot' });
      // Batches handed out from here on are held, and so are those still being written here,
      // which a snapshot taken now may lack; those the snapshot already shows are skipped.
      this.held = leader.unwritten();
      const snapshot = leader.store.serverSnapshot();
      let chunk = await snapshot.next();
      let pending: Array<[string, Uint8Array]> = [];
      for (; !chunk.done; chunk = await snapshot.next()) {
        if (this.closed) return void (await snapshot.return({ seq: 0, term: 0 }));
        if (pending.length > 0) this.send({ t: 'snapshot', pairs: pending, last: false, seq: 0, term: 0 });
        pending = chunk.value;
        await this.drain();
      }
      const pos = chunk.value;
      this.send({ t: 'snapshot', pairs: pending, last: true, seq: pos.seq, term: pos.term });
      this.goLive(pos.seq);
    } catch (err) {
      leader.options.logger.error({ err }, 'server stream: cannot send a follower what it lacks');
      this.close(1011, 'internal error');
    }
  }

  /** Sends the held batches after `seq`, then every new batch as it is written. */
  private goLive(seq: number): void {
    const held = this.held;
    this.held = [];
    let last = seq;
    for (const b of held) {
      if (b.seq <= last) continue;
      this.sendBatch(b);
      last = b.seq;
    }
    this.streaming = true;
  }

  /** Waits while the socket holds a lot unsent (a snapshot of a big store). */
  private async drain(): Promise<void> {
    while (!this.closed && this.channel.bufferedAmount() > 16 * 1024 * 1024) await new Promise((r) => setTimeout(r, 10));
  }

  private fail(code: string, message: string): void {
    this.send({ t: 'error', code, message });
    this.close(4002, message);
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.channel.close(code, reason.slice(0, 120));
    this.end();
  }

  /** The channel closed. */
  end(): void {
    if (this.closed) return;
    this.closed = true;
    this.streaming = false;
    this.heartbeat.stop();
    this.leader.forget(this);
  }
}
