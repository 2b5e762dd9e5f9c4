import { LastUseBook } from '../../store/last-use.js';
import { WatchwordError } from '../../domain/errors.js';
import { GroupCommitter, type QueuedCommit, type WriteBatch } from '../../store/group-commit.js';
import { decodeRaw, encode } from '../../store/records.js';
import { META } from '../../store/schema.js';
import type { BatchReplicator, ServerBatch, ServerPosition, ServerSnapshotIntake, ServerStore } from '../../store/store.js';

/** The key a simulated write puts: one per token ID. */
export const tokenKey = (id: string): string => `t/${id}`;

/** What a simulated disk does: how long a write takes, and whether its process is still alive to finish it. */
export interface SimDisk {
  delay(): number;
  alive(): boolean;
}

/** A write acknowledged by a store: which ID, in which term. */
export interface Acknowledged {
  id: string;
  term: number;
}

/**
 * A server's store for the simulation: its disk is a map that only whole atomic writes change
 * (a write still in flight when its process dies is lost), with the real group commit and
 * fencing of the leader's write path (store/group-commit.ts) over it, and the follower's
 * batches and snapshots as LevelStore takes them. What survives a crash is `disk`.
 */
export class SimStore implements ServerStore {
  readonly disk: Map<string, Uint8Array>;
  /** Last uses: the simulation's servers see none (it drives writes, not requests). */
  readonly lastUse = new LastUseBook();
  private readonly state: ServerPosition;
  private follower = false;
  private replicator: BatchReplicator | undefined;
  private readonly committer: GroupCommitter;
  private nextIndex: number;
  /** Told of every batch this store applies as a follower, and every snapshot it installs. */
  onApply: ((batches: ServerBatch[]) => void) | undefined;
  onInstall: ((position: ServerPosition) => void) | undefined;

  constructor(
    private readonly io: SimDisk,
    saved: Map<string, Uint8Array> = new Map(),
  ) {
    this.disk = new Map(saved);
    const read = (k: string) => (this.disk.has(k) ? Number(decodeRaw(this.disk.get(k) as Uint8Array)) : 0);
    this.state = { seq: read(META.serverSeq), term: read(META.serverTerm) };
    this.nextIndex = read(META.index) + 1;
    const store = this;
    this.committer = new GroupCommitter({
      db: { batch: () => this.batch() },
      durability: 'fsync',
      // Each transaction written as it comes, as when the seeds' schedules were found.
      gatherTurn: false,
      state: this.state,
      // The replicator of the moment, read at every write.
      get replicator() {
        return store.replicator;
      },
      durable: (group, remoteError) => {
        for (const c of group) remoteError === undefined ? c.resolve() : c.reject(remoteError);
      },
      failed: (err, group) => {
        for (const c of group) c.reject(err);
      },
    });
    this.committer.continueAfter(this.state.seq);
  }

  /** One atomic write, durable after the disk's delay if the process is alive then. */
  private batch(): WriteBatch {
    const ops: Array<[string, Uint8Array | null]> = [];
    return {
      put: (k, v) => ops.push([k, v]),
      del: (k) => ops.push([k, null]),
      write: () => this.commit(ops),
      close: async () => undefined,
    };
  }

  private commit(ops: Array<[string, Uint8Array | null]>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      setTimeout(() => {
        if (!this.io.alive()) return reject(new Error('the process died before the write was durable'));
        for (const [k, v] of ops) v === null ? this.disk.delete(k) : this.disk.set(k, v);
        resolve();
      }, this.io.delay());
    });
  }

  /** A client's write of one token ID at the leader: resolves once acknowledged (durable here and on the synchronous set). */
  write(id: string): Promise<Acknowledged> {
    if (this.follower) return Promise.reject(new WatchwordError('NO_LEADER', 'this server is a follower'));
    const index = this.nextIndex++;
    return new Promise<Acknowledged>((resolve, reject) => {
      const commit: QueuedCommit = {
        ops: [{ type: 'put', key: tokenKey(id), value: encode(id) }],
        entryBytes: [],
        layer: [],
        tables: new Map(),
        sync: true,
        tableOps: [],
        meta: [],
        index,
        entries: [],
        // The term of the group just made durable: the writer moves the position before it answers.
        resolve: () => resolve({ id, term: this.state.term }),
        reject,
      };
      this.committer.push(commit);
    });
  }

  /** Token IDs on disk. */
  tokens(): Set<string> {
    const out = new Set<string>();
    for (const k of this.disk.keys()) if (k.startsWith('t/')) out.add(k.slice(2));
    return out;
  }

  serverPosition(): ServerPosition {
    return { seq: this.state.seq, term: this.state.term };
  }

  async *serverSnapshot(): AsyncGenerator<Array<[string, Uint8Array]>, ServerPosition> {
    // A consistent view, as a LevelDB snapshot iterator reads one.
    const view = [...this.disk.entries()];
    const position = this.serverPosition();
    yield view;
    return position;
  }

  async applyServerBatches(batches: ServerBatch[]): Promise<void> {
    if (!this.follower) throw new WatchwordError('INTERNAL', "only a follower applies its leader's batches");
    const last = batches[batches.length - 1];
    if (!last) return;
    this.onApply?.(batches);
    await this.commit(batches.flatMap((b) => b.ops));
    this.committer.continueAfter(last.seq);
    this.state.seq = last.seq;
    this.state.term = last.term;
    this.nextIndex = Math.max(this.nextIndex, this.currentIndex() + 1);
  }

  /** The simulation checks what is durable where, not what readers see: its followers show each batch as it is written. */
  commitServerBatches(_seq: number): void {}

  async beginServerSnapshot(): Promise<ServerSnapshotIntake> {
    const pairs: Array<[string, Uint8Array]> = [];
    return {
      add: async (more) => {
        for (const p of more) pairs.push(p);
      },
      install: (position) => this.installServerSnapshot(pairs, position),
      abandon: async () => undefined,
    };
  }

  /** The whole store replaced by the leader's snapshot in one write (the simulation's disk holds it as one step). */
  async installServerSnapshot(pairs: Array<[string, Uint8Array]>, position: ServerPosition): Promise<void> {
    if (!this.follower) throw new WatchwordError('INTERNAL', 'only a follower installs a snapshot');
    this.onInstall?.(position);
    const incoming = new Set(pairs.map(([k]) => k));
    const ops: Array<[string, Uint8Array | null]> = [...this.disk.keys()].filter((k) => !incoming.has(k)).map((k) => [k, null]);
    ops.push(...pairs, [META.serverSeq, encode(position.seq)], [META.serverTerm, encode(position.term)]);
    await this.commit(ops);
    this.state.seq = position.seq;
    this.state.term = position.term;
    this.committer.continueAfter(position.seq);
    this.nextIndex = this.currentIndex() + 1;
  }

  setFollower(follower: boolean): void {
    this.follower = follower;
  }

  setReplicator(replicator: BatchReplicator | undefined): void {
    this.replicator = replicator;
  }

  quiesce(): Promise<void> {
    return this.committer.drain();
  }

  currentIndex(): number {
    const v = this.disk.get(META.index);
    return v ? Number(decodeRaw(v)) : 0;
  }
}
