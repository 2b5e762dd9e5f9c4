import type { Logger } from 'pino';
import type { Metrics } from '../observability/metrics.js';
import { META, TABLE_NAMES, appendRecords, emptyRecords } from '../store/schema.js';
import type { Store } from '../store/store.js';
import { type ApplyOutcome, type Cursor, type GlobalState, type SecretConflict, applyEntries, applySnapshot } from './apply.js';
import { type DatacenterInfo, PROTOCOL_VERSION, type PrimaryFrame, type SecondaryFrame } from './protocol.js';

const emptyState = (): GlobalState => ({ ...emptyRecords(), bootstrap: null });

/** Frames applied in order (check-ids is answered as it arrives). */
type Queued = Exclude<PrimaryFrame, { t: 'check-ids' }>;

/** What the stream does outside itself: frames to send, and what the status reports. */
export interface StreamEffects {
  send(frame: SecondaryFrame): void;
  /** The stream made progress (status LastSuccess). */
  succeeded(): void;
  /** Something went wrong that the status should say (the connection may go on). */
  failed(message: string): void;
  /** Applying failed: the connection must end; the next one resumes from the cursor on disk. */
  abort(message: string): void;
}

/**
 * The secondary's end of the replication protocol, without a socket: fed decoded frames
 * in the order they arrived (as ws's Receiver is fed bytes), it applies them to the store
 * and answers through `effects.send`. Frames are handled strictly in order; each batch is
 * applied in one transaction together with the cursor, so a crash at any moment resumes
 * exactly where the disk says. Entries frames that queue up while a batch is written are
 * applied together: one sync per batch, not per frame.
 */
export class SecondaryStream {
  private cursor: Cursor = { logID: '', index: 0 };
  /** Local state equals the primary's up to this primary index. */
  private appliedUpTo = 0;
  private welcomeLogID = '';
  private primaryIndex = 0;
  private datacenterList: DatacenterInfo[] = [];
  private snapshotBuffer: GlobalState | undefined;
  private inbox: Queued[] = [];
  private working: Promise<void> | undefined;
  /** Bumped by every new connection: frames of an older one are dropped. */
  private generation = 0;
  private welcomed = false;
  private readonly waiters = new Set<{ index: number; resolve: (ok: boolean) => void }>();
  /** Global tokens skipped because a Local token here holds their secret, by AccessorID. */
  private readonly conflicts = new Map<string, SecretConflict>();

  constructor(
    private readonly store: Store,
    private readonly effects: StreamEffects,
    private readonly logger: Logger,
    private readonly metrics?: Metrics,
  ) {
    const saved = store.getMeta(META.cursor) as Cursor | undefined;
    if (saved !== undefined) this.cursor = saved;
    this.appliedUpTo = this.cursor.index;
    this.metrics?.replicationAppliedIndex.set(this.appliedUpTo);
  }

  /** A new connection: its first frame. Whatever the previous connection left unhandled is dropped. */
  hello(datacenter: string, address: string): SecondaryFrame {
    this.generation++;
    this.inbox = [];
    this.snapshotBuffer = undefined;
    this.welcomed = false;
    return { t: 'hello', v: PROTOCOL_VERSION, datacenter, address, logID: this.cursor.logID || null, index: this.cursor.index };
  }

  /** The connection ended: frames still queued are dropped. */
  disconnected(): void {
    this.generation++;
    this.inbox = [];
    this.welcomed = false;
  }

  /** Feeds one frame. check-ids is answered at once, not behind the frames being applied. */
  receive(frame: PrimaryFrame): void {
    if (frame.t === 'check-ids') {
      this.effects.send({ t: 'ids-in-use', req: frame.req, inUse: frame.ids.filter((id) => this.heldByLocalToken(id)) });
      return;
    }
    this.inbox.push(frame);
    this.working ??= this.drain(this.generation).finally(() => {
      this.working = undefined;
    });
  }

  /** Resolves once every frame fed so far is handled. */
  async idle(): Promise<void> {
    while (this.working) await this.working;
  }

  /** Whether the primary has answered this connection's hello. */
  isWelcomed(): boolean {
    return this.welcomed;
  }

  appliedIndex(): number {
    return this.appliedUpTo;
  }

  primaryIndexSeen(): number {
    return this.primaryIndex;
  }

  datacenters(): DatacenterInfo[] {
    return this.datacenterList;
  }

  secretConflicts(): SecretConflict[] {
    return [...this.conflicts.values()];
  }

  /** Resolves true once local state includes the primary's index `index`, false after `timeoutMs`. */
  waitForApplied(index: number, timeoutMs: number): Promise<boolean> {
    if (this.appliedUpTo >= index) return Promise.resolve(true);
    return new Promise((resolve) => {
      const waiter = { index, resolve };
      this.waiters.add(waiter);
      setTimeout(() => {
        if (this.waiters.delete(waiter)) resolve(false);
      }, timeoutMs).unref();
    });
  }

  /** Stops: waiters are told no. */
  async stop(): Promise<void> {
    this.disconnected();
    for (const w of this.waiters) w.resolve(false);
    this.waiters.clear();
    await this.working;
  }

  private advance(upTo: number): void {
    if (upTo <= this.appliedUpTo) return;
    this.appliedUpTo = upTo;
    this.metrics?.replicationAppliedIndex.set(upTo);
    this.metrics?.replicationLagEntries.set(Math.max(0, this.primaryIndex - upTo));
    for (const w of this.waiters) {
      if (upTo >= w.index) {
        this.waiters.delete(w);
        w.resolve(true);
      }
    }
  }

  private async drain(generation: number): Promise<void> {
    try {
      while (this.inbox.length > 0 && this.generation === generation) {
        const frame = this.inbox.shift() as Queued;
        if (frame.t !== 'entries') {
          await this.handle(frame);
          continue;
        }
        const batch = [frame];
        while (this.inbox[0]?.t === 'entries') batch.push(this.inbox.shift() as typeof frame);
        await this.applyEntryFrames(batch);
      }
    } catch (err) {
      this.logger.error({ err }, 'replication: apply failed; reconnecting');
      if (this.generation === generation) this.effects.abort(`applying replicated changes failed: ${(err as Error).message}`);
    }
  }

  private async applyEntryFrames(frames: Array<Extract<PrimaryFrame, { t: 'entries' }>>): Promise<void> {
    const entries = frames.flatMap((f) => f.entries);
    const upTo = Math.max(...frames.map((f) => f.upTo), this.cursor.index);
    const cursor = { logID: this.welcomeLogID, index: upTo };
    // Nothing to write: the cursor on disk may lag; resuming from it is harmless.
    if (entries.length > 0)
      this.noteConflicts(await this.store.transact((tx) => applyEntries(tx, entries, cursor), { sync: false }), false);
    const now = Date.now();
    for (const f of frames) {
      if (f.committedAt === undefined || f.entries.length === 0) continue;
      const lag = Math.max(0, now - f.committedAt);
      this.metrics?.replicationLagMs.set(lag);
      for (let i = 0; i < f.entries.length; i++) this.metrics?.replicationApplyLag.observe(lag / 1000);
    }
    this.cursor = cursor;
    this.primaryIndex = Math.max(this.primaryIndex, upTo);
    this.advance(upTo);
    this.effects.send({ t: 'ack', index: this.appliedUpTo });
    this.effects.succeeded();
  }

  private async handle(frame: Exclude<PrimaryFrame, { t: 'entries' | 'check-ids' }>): Promise<void> {
    switch (frame.t) {
      case 'welcome':
        this.welcomeLogID = frame.logID;
        this.primaryIndex = frame.primaryIndex;
        this.datacenterList = frame.datacenters;
        if (frame.logID !== this.cursor.logID) {
          // Another log (a rebuilt primary): what was applied says nothing about it.
          this.appliedUpTo = 0;
          this.metrics?.replicationAppliedIndex.set(0);
        }
        // Connected once the primary has answered the hello, not when the socket opens.
        this.welcomed = true;
        if (frame.mode === 'snapshot') {
          this.snapshotBuffer = emptyState();
          this.logger.info({ from: this.cursor.index }, 'replication: receiving a snapshot from the primary');
        }
        this.effects.succeeded();
        return;
      case 'snapshot': {
        const buf = (this.snapshotBuffer ??= emptyState());
        for (const t of TABLE_NAMES) appendRecords(buf, frame, t);
        if (frame.bootstrap) buf.bootstrap = frame.bootstrap;
        if (!frame.last) return;
        this.snapshotBuffer = undefined;
        const cursor = { logID: frame.logID, index: frame.index };
        const outcome = await this.store.transact((tx) => applySnapshot(tx, buf, cursor), { sync: false });
        this.noteConflicts(outcome, true);
        this.cursor = cursor;
        this.appliedUpTo = 0;
        this.advance(frame.index);
        this.effects.send({ t: 'ack', index: frame.index });
        this.effects.succeeded();
        this.logger.info({ index: frame.index, changed: outcome.changed, tokens: buf.tokens.length }, 'replication: snapshot applied');
        return;
      }
      case 'ping':
        this.primaryIndex = Math.max(this.primaryIndex, frame.primaryIndex);
        this.datacenterList = frame.datacenters;
        // Every earlier frame is applied by now (frames are handled in order).
        if (this.cursor.logID === this.welcomeLogID && this.snapshotBuffer === undefined) this.advance(frame.upTo);
        this.metrics?.replicationLagEntries.set(Math.max(0, this.primaryIndex - this.appliedUpTo));
        return;
      case 'error':
        this.effects.failed(`the primary reported: ${frame.message}`);
        return;
    }
  }

  private noteConflicts(outcome: ApplyOutcome, fresh: boolean): void {
    if (fresh) this.conflicts.clear();
    for (const id of outcome.resolved) this.conflicts.delete(id);
    for (const c of outcome.conflicts) {
      this.conflicts.set(c.AccessorID, c);
      this.logger.warn(c, 'replication: a global token was not applied: a Local token of this datacenter holds its secret');
    }
  }

  /** Whether a Local token of this datacenter has this AccessorID or SecretID. */
  private heldByLocalToken(id: string): boolean {
    return this.store.reader.getToken(id)?.Local === true || this.store.reader.getTokenBySecret(id)?.Local === true;
  }
}
