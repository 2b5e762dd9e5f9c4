import { recordFormOf } from './releases.js';
import { tablesLevel } from '../store/schema.js';
import type { Logger } from 'pino';
import type { Metrics } from '../observability/metrics.js';
import { META } from '../store/schema.js';
import type { Store } from '../store/store.js';
import { type ApplyOutcome, type Cursor, FIRST_EPOCH, type SecretConflict, applyEntries, epochSeenBy } from './apply.js';
import { CatchUp, type RolledBack } from './catch-up.js';
import type { Takeover } from './placement.js';
import { type DatacenterInfo, PROTOCOL_VERSION, type PrimaryFrame, type SecondaryFrame } from './protocol.js';

/** Frames applied in order (check-ids is answered as it arrives). */
type Queued = Exclude<PrimaryFrame, { t: 'check-ids' }>;

/** How a wait for an index ended: it arrived, the time ran out, or the connection it was bound to ended first. */
/**
 * What became of a write the leader (or the primary) acknowledged with an index, as this server
 * waits to hold it: `applied` here; `pending` (not yet, within the wait: the acknowledgement
 * stands); `unknown` when the leader that answered was of a release that acknowledged writes while
 * it stopped (version.ts, FENCED_ON_STOP) and its stream ended before the write came over it.
 */
export type Arrival = 'applied' | 'pending' | 'unknown';

export type Reached = 'reached' | 'timeout' | 'ended';

/** What the stream does outside itself: frames to send, and what the status reports. */
export interface StreamEffects {
  send(frame: SecondaryFrame): void;
  /** The stream made progress (status LastSuccess). */
  succeeded(): void;
  /** Something went wrong that the status should say (the connection may go on). */
  failed(message: string): void;
  /** Applying failed: the connection must end; the next one resumes from the cursor on disk. */
  abort(message: string): void;
  /**
   * The primary is of a lower epoch than one this secondary has seen (docs/datacenters.md): it is stale, and
   * nothing it sends is applied; the connection ends (`abort` follows) and is tried again later.
   */
  stalePrimary?(epoch: number, seen: number): void;
  /** A snapshot from a new log (a new primary, a restore) replaced or removed global objects held here: what they were. */
  rolledBack?(objects: RolledBack[], index: number): void;
  /** A planned transfer: this datacenter, having applied everything up to `upTo`, becomes the primary with `epoch`. */
  handover?(epoch: number, upTo: number): void;
  /** Frames wait to be applied past a bound: stop reading from the primary until `resume` (its sends then wait on TCP). */
  pause?(): void;
  resume?(): void;
}

/** Frames waiting to be applied past which reading from the primary stops, and below which it starts again. */
const INBOX_HIGH = 16;
const INBOX_LOW = 4;

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
  /** This connection's primary was refused as stale: nothing more of it is taken, until the next hello. */
  private refusing = false;
  private primaryIndex = 0;
  private datacenterList: DatacenterInfo[] = [];
  /** From a welcome that announces a snapshot until it is installed. */
  private inSnapshot = false;
  /** The snapshot announced comes from another log than the one followed: what it replaces is listed. */
  private rollingBack = false;
  /** This datacenter took the changes after this index itself, as the primary the snapshot's sender took over from. */
  private ownAfter: number | undefined;
  /** This datacenter's name (from its hello). */
  private datacenter = '';
  /** The protocol version the connection speaks (agreed at its upgrade). */
  version = PROTOCOL_VERSION;
  /** The snapshot being taken in, from its first chunk to its install. */
  private catchUp: CatchUp | undefined;
  private inbox: Queued[] = [];
  private paused = false;
  private working: Promise<void> | undefined;
  /** Bumped by every new connection: frames of an older one are dropped. */
  private generation = 0;
  private welcomed = false;
  /** Waits for an index; `generation` set: ended with the connection it was bound to. */
  private readonly waiters = new Set<{ index: number; generation?: number; resolve: (how: Reached) => void }>();
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
  hello(datacenter: string, address: string, version = PROTOCOL_VERSION): SecondaryFrame {
    this.datacenter = datacenter;
    this.disconnected();
    this.refusing = false;
    this.version = version;
    // Applied at an earlier record form than this stream speaks, or without a table it carries: everything is fetched again, whole.
    const laterForm = (this.cursor.form ?? 1) < recordFormOf(version);
    const laterTables = (this.cursor.tables ?? 0) < tablesLevel(version);
    const refetch = laterForm || laterTables;
    if (laterForm)
      this.logger.info(
        { from: this.cursor.form ?? 1, to: recordFormOf(version) },
        'replication: a later record form: fetching everything again',
      );
    else if (laterTables && this.cursor.index > 0)
      this.logger.info(
        { from: this.cursor.tables ?? 0, to: tablesLevel(version) },
        'replication: a table this datacenter was not sent before: fetching everything again',
      );
    return {
      t: 'hello',
      v: version,
      datacenter,
      address,
      logID: refetch ? null : this.cursor.logID || null,
      index: refetch ? 0 : this.cursor.index,
      epoch: this.seenEpoch(),
    };
  }

  /** The record form this stream speaks, as a cursor keeps it (nothing for the first form: a cursor the previous release reads as its own). */
  private formMark(): { form?: number; tables?: number } {
    const form = recordFormOf(this.version);
    const tables = tablesLevel(this.version);
    return { ...(form > 1 ? { form } : {}), ...(tables > 0 ? { tables } : {}) };
  }

  /** The highest primary epoch this secondary has seen (what its cursor on disk says). */
  seenEpoch(): number {
    return Math.max(this.cursor.epoch ?? FIRST_EPOCH, epochSeenBy(this.store));
  }

  /** The connection ended: frames still queued are dropped. */
  disconnected(): void {
    this.generation++;
    for (const w of this.waiters)
      if (w.generation !== undefined) {
        this.waiters.delete(w);
        w.resolve('ended');
      }
    this.inbox = [];
    this.welcomed = false;
    this.inSnapshot = false;
    this.flowOn();
    // A snapshot half taken in is given up: the next connection starts over (its staged store is removed).
    const catchUp = this.catchUp;
    this.catchUp = undefined;
    if (catchUp) void catchUp.abandon().catch(() => undefined);
  }

  private flowOn(): void {
    if (!this.paused) return;
    this.paused = false;
    this.effects.resume?.();
  }

  /** Feeds one frame. check-ids is answered at once, not behind the frames being applied. */
  receive(frame: PrimaryFrame): void {
    if (this.refusing) return;
    if (frame.t === 'check-ids') {
      this.effects.send({ t: 'ids-in-use', req: frame.req, inUse: frame.ids.filter((id) => this.heldByLocalToken(id)) });
      return;
    }
    if (frame.t === 'uses') {
      // Global tokens' last uses, from wherever they were seen: kept when later than what is known here.
      for (const [id, ms] of frame.uses) if (this.store.reader.isGlobalToken(id)) this.store.lastUse.merge(id, ms);
      return;
    }
    this.inbox.push(frame);
    if (!this.paused && this.inbox.length > INBOX_HIGH) {
      this.paused = true;
      this.effects.pause?.();
    }
    this.work();
  }

  /** Applies what is queued, unless that is under way; what an ended connection's loop left is taken up again. */
  private work(): void {
    this.working ??= this.drain(this.generation).finally(() => {
      this.working = undefined;
      if (this.inbox.length > 0) this.work();
    });
  }

  /** The next frame to apply. */
  private next(): Queued {
    const frame = this.inbox.shift() as Queued;
    if (this.inbox.length < INBOX_LOW) this.flowOn();
    return frame;
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
  async waitForApplied(index: number, timeoutMs: number): Promise<boolean> {
    return (await this.awaitApplied(index, timeoutMs)) === 'reached';
  }

  /** The connection now, once the primary has welcomed it, and the version it speaks. */
  current(): { generation: number; version: number } | undefined {
    return this.welcomed ? { generation: this.generation, version: this.version } : undefined;
  }

  /** As waitForApplied; with `generation`, `ended` once that connection ends before the index arrives over it. */
  awaitApplied(index: number, timeoutMs: number, generation?: number): Promise<Reached> {
    if (this.appliedUpTo >= index) return Promise.resolve('reached');
    if (generation !== undefined && generation !== this.generation) return Promise.resolve('ended');
    return new Promise((resolve) => {
      const waiter = { index, resolve, ...(generation !== undefined ? { generation } : {}) };
      this.waiters.add(waiter);
      setTimeout(() => {
        if (this.waiters.delete(waiter)) resolve('timeout');
      }, timeoutMs).unref();
    });
  }

  /** Stops: waiters are told no. */
  async stop(): Promise<void> {
    this.disconnected();
    for (const w of this.waiters) w.resolve('timeout');
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
        w.resolve('reached');
      }
    }
  }

  private async drain(generation: number): Promise<void> {
    try {
      while (this.inbox.length > 0 && this.generation === generation) {
        const frame = this.next();
        if (frame.t !== 'entries') {
          await this.handle(frame, generation);
          continue;
        }
        const batch = [frame];
        while (this.inbox[0]?.t === 'entries') batch.push(this.next() as typeof frame);
        await this.applyEntryFrames(batch, generation);
      }
    } catch (err) {
      // A connection that has ended (a catch-up given up under it) is no failure of its own.
      if (this.generation !== generation) return;
      this.logger.error({ err }, 'replication: apply failed; reconnecting');
      this.effects.abort(`applying replicated changes failed: ${(err as Error).message}`);
    }
  }

  private async applyEntryFrames(frames: Array<Extract<PrimaryFrame, { t: 'entries' }>>, generation: number): Promise<void> {
    const entries = frames.flatMap((f) => f.entries);
    const upTo = Math.max(...frames.map((f) => f.upTo), this.cursor.index);
    const cursor = { logID: this.welcomeLogID, index: upTo, epoch: this.seenEpoch(), at: Date.now(), ...this.formMark() };
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
    if (this.generation !== generation) return;
    this.effects.send({ t: 'ack', index: this.appliedUpTo });
    this.effects.succeeded();
  }

  private async handle(frame: Exclude<PrimaryFrame, { t: 'entries' | 'check-ids' }>, generation: number): Promise<void> {
    switch (frame.t) {
      case 'welcome':
        if (this.refusedAsStale(frame.epoch)) return;
        // Another log than the one followed (a promoted primary, a restore), or this datacenter's first
        // after it was itself the primary: the snapshot replaces state that no log entry took back.
        this.rollingBack = frame.mode === 'snapshot' && this.rollsBack(frame.logID, frame.since);
        // This datacenter was the primary the sender took over from: its own changes after the takeover's index are what is lost.
        this.ownAfter = frame.since?.From === this.datacenter ? frame.since.Index : undefined;
        if (frame.epoch > this.seenEpoch()) {
          // A newer primary (a promotion): its epoch is durable before anything of it is applied,
          // so no restart can make this secondary follow an older one again.
          const cursor = { ...this.cursor, epoch: frame.epoch };
          await this.store.transact((tx) => tx.putMeta(META.cursor, cursor));
          this.cursor = cursor;
          if (this.generation !== generation) return;
          this.logger.info({ epoch: frame.epoch }, 'replication: following a primary of a newer epoch');
        }
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
          this.inSnapshot = true;
          this.logger.info({ from: this.cursor.index }, 'replication: receiving a snapshot from the primary');
        }
        this.effects.succeeded();
        return;
      case 'snapshot': {
        // Each chunk into a staged store as it arrives (replication/catch-up.ts): memory holds the
        // state it becomes and one chunk, and readers see the old state until it is installed.
        if (!this.catchUp) {
          const catchUp = await CatchUp.begin(this.store, {
            listRolledBack: this.rollingBack,
            ...(this.ownAfter !== undefined ? { changedAfter: this.ownAfter } : {}),
          });
          if (this.generation !== generation) return void (await catchUp.abandon());
          this.catchUp = catchUp;
        }
        const catchUp = this.catchUp;
        await catchUp.add(frame);
        if (!frame.last || this.generation !== generation) return;
        this.catchUp = undefined;
        const cursor = { logID: frame.logID, index: frame.index, epoch: this.seenEpoch(), at: Date.now(), ...this.formMark() };
        const outcome = await catchUp.install(cursor);
        this.noteConflicts(outcome, true);
        this.cursor = cursor;
        this.appliedUpTo = 0;
        this.advance(frame.index);
        this.logger.info({ index: frame.index, changed: outcome.changed, records: outcome.records }, 'replication: snapshot applied');
        if (outcome.rolledBack && outcome.rolledBack.length > 0) {
          this.logger.warn({ count: outcome.rolledBack.length }, 'replication: global objects held here were rolled back to the primary');
          this.effects.rolledBack?.(outcome.rolledBack, frame.index);
        }
        // Installed (the next connection resumes from it), but a connection that ended meanwhile hears nothing more.
        if (this.generation !== generation) return;
        this.inSnapshot = false;
        this.effects.send({ t: 'ack', index: frame.index });
        this.effects.succeeded();
        return;
      }
      case 'ping':
        if (this.refusedAsStale(frame.epoch)) return;
        this.primaryIndex = Math.max(this.primaryIndex, frame.primaryIndex);
        this.datacenterList = frame.datacenters;
        // Every earlier frame is applied by now (frames are handled in order).
        if (this.cursor.logID === this.welcomeLogID && !this.inSnapshot) this.advance(frame.upTo);
        this.metrics?.replicationLagEntries.set(Math.max(0, this.primaryIndex - this.appliedUpTo));
        return;
      case 'error':
        this.effects.failed(`the primary reported: ${frame.message}`);
        return;
      case 'handover':
        // Frames are applied in order: everything the primary sent before it is applied by now.
        if (frame.epoch <= this.seenEpoch() || this.appliedUpTo < frame.upTo) {
          this.logger.error(
            { epoch: frame.epoch, seen: this.seenEpoch(), upTo: frame.upTo, applied: this.appliedUpTo },
            'replication: refused a handover (not a newer epoch, or not everything before it applied)',
          );
          this.effects.failed('the primary offered a handover this datacenter could not take; it stays a secondary');
          return;
        }
        this.refusing = true;
        this.logger.warn({ epoch: frame.epoch, upTo: frame.upTo }, 'replication: the primary hands its role to this datacenter');
        this.effects.handover?.(frame.epoch, frame.upTo);
        return;
    }
  }

  /**
   * Whether a snapshot from a primary of log `logID` (which took over as `since` says) replaces
   * state that no log entry took back. This datacenter was the primary taken over from: yes (its
   * changes after the takeover are listed). It followed the same previous primary: only if it had
   * applied more of it than the new primary had. Another log (a restore, a rebuilt primary), or its
   * first after it was itself a primary: yes.
   */
  private rollsBack(logID: string, since: Takeover | undefined): boolean {
    if (since?.From === this.datacenter) return true;
    if (since?.Log !== undefined && this.cursor.logID === since.Log) return this.cursor.index > since.Index;
    return this.cursor.logID !== '' ? logID !== this.cursor.logID : this.store.getMeta(META.placement) !== undefined;
  }

  /**
   * Whether a primary of `epoch` is stale here (a lower epoch than the highest seen, which a
   * welcome of a newer primary has already made the cursor's): then it is refused, said, and the
   * connection ended; the frames queued behind are dropped with it.
   */
  private refusedAsStale(epoch: number): boolean {
    const seen = this.seenEpoch();
    if (epoch >= seen) return false;
    this.logger.error({ epoch, seen }, 'replication: refused a stale primary (a lower epoch than one already followed)');
    this.effects.stalePrimary?.(epoch, seen);
    this.disconnected();
    this.refusing = true;
    this.effects.abort(
      `STALE_PRIMARY: the primary's epoch is ${epoch}, lower than epoch ${seen} already followed: nothing of it is applied`,
    );
    return true;
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
