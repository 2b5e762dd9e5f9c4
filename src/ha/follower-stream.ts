import type { Logger } from 'pino';
import type { ServerBatch, ServerStore } from '../store/store.js';
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
}

type Queued = { kind: 'snapshot'; pairs: Array<[string, Uint8Array]>; seq: number; term: number } | { kind: 'batch'; batch: ServerBatch };

/**
 * A follower's end of the server stream (README, "Several servers per datacenter"), without a socket: fed its leader's
 * decoded frames in order, it takes a snapshot when told, applies batches in order
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
  private snapshot: Array<[string, Uint8Array]> = [];
  private pendingSnapshot: Extract<Queued, { kind: 'snapshot' }> | undefined;
  private queue: ServerBatch[] = [];
  private working: Promise<void> | undefined;
  /** Bumped by every connection: what an older one left is dropped. */
  private generation = 0;
  private stopped = false;
  /**
   * What this server holds is a prefix of this leader's history: the leader resumed it from
   * its tail, or its snapshot is installed. Until then (a new connection, or a snapshot on
   * its way) it may hold batches the leader never wrote, so its index proves nothing.
   */
  private inHistory = false;
  /** The leader's commit point as this connection last heard it. */
  private leaderCommit = 0;

  constructor(
    private readonly store: ServerStore,
    private readonly options: { name: string; address: () => string; term: number; logger: Logger },
    private readonly effects: FollowerStreamEffects,
  ) {}

  /** A new connection: its first frame. Whatever the previous one left unapplied is dropped. */
  hello(): FollowerFrame {
    this.disconnected();
    const pos = this.store.serverPosition();
    return {
      t: 'hello',
      v: SERVER_PROTOCOL_VERSION,
      name: this.options.name,
      address: this.options.address(),
      seq: pos.seq,
      term: pos.term,
    };
  }

  /** Whether this server's store is a prefix of the leader's history (its index can be compared with the leader's). */
  holdsLeaderHistory(): boolean {
    return this.inHistory;
  }

  /** The connection ended: queued frames are dropped. */
  disconnected(): void {
    this.generation++;
    this.inHistory = false;
    this.leaderCommit = 0;
    this.queue = [];
    this.pendingSnapshot = undefined;
    this.snapshot = [];
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
      case 'welcome':
        if (frame.term < this.options.term)
          return this.effects.drop(`the leader's term ${frame.term} is older than the current term ${this.options.term}`);
        this.term = frame.term;
        this.snapshot = [];
        this.inHistory = frame.mode === 'tail';
        this.heardCommit(this.leaderCommit);
        this.effects.welcomed();
        return;
      case 'snapshot':
        for (const p of frame.pairs) this.snapshot.push(p);
        if (frame.last) {
          const pairs = this.snapshot;
          this.snapshot = [];
          this.enqueue({ kind: 'snapshot', pairs, seq: frame.seq, term: frame.term });
        }
        return;
      case 'batch':
        if (frame.term < this.term || frame.term < this.options.term)
          return this.effects.drop(`refused a batch of the older term ${frame.term}`);
        this.leaderSeq = Math.max(this.leaderSeq, frame.seq);
        this.enqueue({ kind: 'batch', batch: frame });
        // Shown to readers once committed; a leader that does not say (an older version) commits what it sends.
        this.heardCommit(frame.commit ?? frame.seq);
        return;
    }
  }

  private enqueue(item: Queued): void {
    if (item.kind === 'snapshot') {
      this.pendingSnapshot = item;
      this.queue = [];
    } else {
      this.queue.push(item.batch);
    }
    this.working ??= this.apply(this.generation).finally(() => {
      this.working = undefined;
    });
  }

  /**
   * The leader committed every batch up to `seq`. It says so of its own history: the batches
   * this server holds are shown by it only while they are a prefix of that history (resumed
   * from the leader's tail, or after its snapshot); before, they may be another history's
   * (a batch the leader refused), which the snapshot on its way replaces.
   */
  private heardCommit(seq: number): void {
    this.leaderCommit = Math.max(this.leaderCommit, seq);
    if (this.inHistory) this.store.commitServerBatches(this.leaderCommit);
  }

  /** Resolves once nothing is being applied. */
  async idle(): Promise<void> {
    while (this.working) await this.working;
  }

  /** Applies what arrived, in order: a snapshot first, then queued batches in one write. */
  private async apply(generation: number): Promise<void> {
    const current = () => !this.stopped && generation === this.generation;
    try {
      while (current() && (this.pendingSnapshot || this.queue.length > 0)) {
        if (this.pendingSnapshot) {
          const snap = this.pendingSnapshot;
          this.pendingSnapshot = undefined;
          await this.store.installServerSnapshot(snap.pairs, { seq: snap.seq, term: snap.term });
          this.options.logger.info({ seq: snap.seq, term: snap.term }, 'server stream: installed a snapshot from the leader');
          if (current()) {
            this.inHistory = true;
            this.heardCommit(this.leaderCommit);
            this.effects.send({ t: 'ack', seq: snap.seq });
          }
          continue;
        }
        const batches = this.queue;
        this.queue = [];
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
    }
  }

  /** Stops applying; resolves once nothing is being applied. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.idle();
  }
}
