import type { ClusterPicture } from '../replication/releases.js';
import type { Logger } from 'pino';
import type { ServerBatch, ServerSnapshotIntake, ServerStore } from '../store/store.js';
import { type FollowerFrame, type LeaderFrame, SERVER_PROTOCOL_VERSION } from './server-protocol.js';

/** What the stream does outside itself. */
export interface FollowerStreamEffects {
  send(frame: FollowerFrame): void;
  /** The connection must end; the next hello lets the leader decide again. */
  drop(reason: string): void;
  /** The leader welcomed this connection. */
  welcomed(): void;
  /** The leader (of a secondary datacenter) reports that the primary was last heard `ms` ago. */
  primarySilence?(ms: number): void;
  /** The leader sent the cluster's picture (version 3). */
  cluster?(picture: ClusterPicture): void;
  /** Frames wait to be applied past a bound: stop reading from the leader until `resume` (its writes then wait on TCP). */
  pause?(): void;
  resume?(): void;
}

/** A piece of the leader's snapshot (the last one says which batch it shows). */
type Chunk = { pairs: Array<[string, Uint8Array]>; last: boolean; seq: number; term: number };
type Queued = { kind: 'chunk'; chunk: Chunk; bytes: number } | { kind: 'batch'; batch: ServerBatch; bytes: number };

/** Bytes of frames waiting to be applied past which the shell stops reading from the leader, and below which it reads again. */
const BACKLOG_HIGH = 64 * 1024 * 1024;
const BACKLOG_LOW = 16 * 1024 * 1024;

/**
 * A follower's end of the server stream (docs/servers.md, "Several servers per datacenter"), without a socket: fed its leader's
 * decoded frames in order, it takes a snapshot when told (piece by piece into a staged store,
 * so a large one costs no more memory than the state it becomes), applies batches in order
 * (several queued ones in one atomic write) and confirms each once durable. A batch that
 * does not follow the last applied one, or comes from an older term, ends the connection.
 * The WebSocket, proofs, heartbeat and back-off are the shell's (follower.ts); tests feed
 * frames (test/ha/follower-stream.test.ts).
 */
export class FollowerStream {
  /** Last batch the leader is known to have written. */
  leaderSeq = 0;
  /** Set by the welcome: the connection's term. */
  private term = 0;
  /** Frames to apply, in order: snapshot pieces and batches. */
  private queue: Queued[] = [];
  private queuedBytes = 0;
  private paused = false;
  /** The snapshot being taken in, from its first piece to its install. */
  private intake: ServerSnapshotIntake | undefined;
  private working: Promise<void> | undefined;
  /** Bumped by every connection: what an older one left is dropped. */
  private generation = 0;
  private stopped = false;
  /**
   * What this server holds is a prefix of this leader's batch log: the leader resumed it from
   * its tail, or its snapshot is installed. Until then (a new connection, or a snapshot on
   * its way) it may hold batches the leader never wrote, so its index proves nothing.
   */
  private inLeaderLog = false;
  /** The leader's commit point as this connection last heard it. */
  private leaderCommit = 0;

  constructor(
    private readonly store: ServerStore,
    private readonly options: { name: string; address: () => string; term: number; logger: Logger },
    private readonly effects: FollowerStreamEffects,
  ) {}

  /** A new connection: its first frame. Whatever the previous one left unapplied is dropped. */
  hello(version = SERVER_PROTOCOL_VERSION): FollowerFrame {
    this.disconnected();
    const pos = this.store.serverPosition();
    return {
      t: 'hello',
      v: version,
      name: this.options.name,
      address: this.options.address(),
      seq: pos.seq,
      term: pos.term,
    };
  }

  /** The connection now (each hello and each end counts one on). */
  get connection(): number {
    return this.generation;
  }

  /** Whether this server's store is a prefix of the leader's batch log (its index can be compared with the leader's). */
  holdsLeaderLog(): boolean {
    return this.inLeaderLog;
  }

  /** The connection ended: queued frames are dropped. */
  disconnected(): void {
    this.generation++;
    this.inLeaderLog = false;
    this.leaderCommit = 0;
    this.clearQueue();
    this.dropIntake();
  }

  private clearQueue(): void {
    this.queue = [];
    this.queuedBytes = 0;
    if (this.paused) {
      this.paused = false;
      this.effects.resume?.();
    }
  }

  /** A snapshot half taken in is given up (its staged store removed). */
  private dropIntake(): void {
    const intake = this.intake;
    this.intake = undefined;
    if (intake) void intake.abandon().catch(() => undefined);
  }

  receive(frame: LeaderFrame): void {
    switch (frame.t) {
      case 'ping':
        this.leaderSeq = Math.max(this.leaderSeq, frame.seq);
        if (frame.silent !== undefined) this.effects.primarySilence?.(frame.silent);
        if (frame.commit !== undefined) this.heardCommit(frame.commit);
        return;
      case 'error':
        return this.effects.drop(`the leader refused: ${frame.message}`);
      case 'cluster':
        return this.effects.cluster?.(frame.picture);
      case 'welcome':
        if (frame.term < this.options.term)
          return this.effects.drop(`the leader's term ${frame.term} is older than the current term ${this.options.term}`);
        this.term = frame.term;
        this.inLeaderLog = frame.mode === 'tail';
        this.heardCommit(this.leaderCommit);
        this.effects.welcomed();
        return;
      case 'snapshot': {
        let bytes = 0;
        for (const [k, v] of frame.pairs) bytes += k.length + v.length;
        this.enqueue({ kind: 'chunk', chunk: { pairs: frame.pairs, last: frame.last, seq: frame.seq, term: frame.term }, bytes });
        return;
      }
      case 'batch':
        if (frame.term < this.term || frame.term < this.options.term)
          return this.effects.drop(`refused a batch of the older term ${frame.term}`);
        this.leaderSeq = Math.max(this.leaderSeq, frame.seq);
        this.enqueue({ kind: 'batch', batch: frame, bytes: frame.ops.reduce((n, [k, v]) => n + k.length + (v?.length ?? 0), 0) });
        // Shown to readers once committed; a leader that does not say (an older version) commits what it sends.
        this.heardCommit(frame.commit ?? frame.seq);
        return;
    }
  }

  private enqueue(item: Queued): void {
    this.queue.push(item);
    this.queuedBytes += item.bytes;
    if (!this.paused && this.queuedBytes > BACKLOG_HIGH) {
      this.paused = true;
      this.effects.pause?.();
    }
    this.work();
  }

  /** Applies what is queued, unless that is under way; what an ended connection's loop left is taken up again. */
  private work(): void {
    this.working ??= this.apply(this.generation).finally(() => {
      this.working = undefined;
      if (this.queue.length > 0 && !this.stopped) this.work();
    });
  }

  /** The next frames to apply: one snapshot piece, or every batch queued up to the next piece. */
  private take(): Queued[] {
    const first = this.queue[0];
    let n = 0;
    if (first?.kind === 'chunk') n = 1;
    else while (n < this.queue.length && (this.queue[n] as Queued).kind === 'batch') n++;
    const taken = this.queue.splice(0, n);
    for (const q of taken) this.queuedBytes -= q.bytes;
    if (this.paused && this.queuedBytes < BACKLOG_LOW) {
      this.paused = false;
      this.effects.resume?.();
    }
    return taken;
  }

  /**
   * The leader committed every batch up to `seq`. It says so of its own batch log: the batches
   * this server holds are shown by it only while they are a prefix of that batch log (resumed
   * from the leader's tail, or after its snapshot); before, they may be another batch log's
   * (a batch the leader refused), which the snapshot on its way replaces.
   */
  private heardCommit(seq: number): void {
    this.leaderCommit = Math.max(this.leaderCommit, seq);
    if (this.inLeaderLog) this.store.commitServerBatches(this.leaderCommit);
  }

  /** Resolves once nothing is being applied. */
  async idle(): Promise<void> {
    while (this.working) await this.working;
  }

  /** Applies what arrived, in order: snapshot pieces into the intake (installed at the last), queued batches in one write. */
  private async apply(generation: number): Promise<void> {
    const current = () => !this.stopped && generation === this.generation;
    try {
      while (current() && this.queue.length > 0) {
        const items = this.take();
        const head = items[0] as Queued;
        if (head.kind === 'chunk') {
          const chunk = head.chunk;
          this.intake ??= await this.store.beginServerSnapshot();
          if (!current()) return;
          await this.intake.add(chunk.pairs);
          if (!chunk.last || !current()) continue;
          const intake = this.intake;
          this.intake = undefined;
          await intake.install({ seq: chunk.seq, term: chunk.term });
          this.options.logger.info({ seq: chunk.seq, term: chunk.term }, 'server stream: installed a snapshot from the leader');
          if (current()) {
            this.inLeaderLog = true;
            this.heardCommit(this.leaderCommit);
            this.effects.send({ t: 'ack', seq: chunk.seq });
          }
          continue;
        }
        const batches = items.map((q) => (q as Extract<Queued, { kind: 'batch' }>).batch);
        let expected = this.store.serverPosition().seq;
        for (const b of batches) {
          if (b.prev !== expected)
            return this.effects.drop(`batch ${b.seq} follows ${b.prev}, but ${expected} is the last applied here; starting over`);
          expected = b.seq;
        }
        await this.store.applyServerBatches(batches);
        if (current()) this.effects.send({ t: 'ack', seq: expected });
      }
    } catch (err) {
      this.options.logger.error({ err }, 'server stream: cannot apply what the leader sent');
      if (current()) this.effects.drop(`cannot apply what the leader sent: ${(err as Error).message}`);
    } finally {
      // A snapshot piece of a connection that ended: what was staged of it goes.
      if (!current()) this.dropIntake();
    }
  }

  /** Stops applying; resolves once nothing is being applied. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.idle();
  }
}
