import { type ReleaseBook, previousRelease } from './releases.js';
import { fittedEntries, fittedRecords } from './fitted.js';
import type { Takeover } from './placement.js';
import type { Logger } from 'pino';
import type { CommitEvent, GlobalSnapshot, Store } from '../store/store.js';
import { type RecordsByTable, TABLE_NAMES } from '../store/schema.js';
import { Heartbeat } from '../transport/heartbeat.js';
import type { FrameChannel } from './frame-channel.js';
import {
  type DatacenterInfo,
  type PrimaryFrame,
  type SecondaryFrame,
  FrameError,
  PROTOCOL_VERSION,
  decodeFrame,
  secondaryFrame,
} from './protocol.js';

export { type FrameChannel, wsChannel } from './frame-channel.js';

/** What the primary reports of each connected secondary. */
export interface SecondaryInfo {
  Datacenter: string;
  Address: string;
  AckedIndex: number;
  LagEntries: number;
  LastContactMs: number;
  ConnectedAt: string;
}

/** How a session paces its stream. */
export interface SessionOptions {
  /** How often each side sends a ping, ms. */
  heartbeatMs: number;
  /** A peer silent for this long is dead, ms. */
  deadPeerMs: number;
  /** Log entries per frame. */
  batchEntries: number;
  /** Records per snapshot frame. */
  snapshotChunk: number;
  /** Pause sending while the socket holds more than this many bytes. */
  highWaterBytes: number;
  /** Pause sending while the secondary is this many indexes behind what was sent. */
  maxUnackedIndexes: number;
}

/** What a session needs of the primary it belongs to (the primary implements it; the session never sees the rest). */
export interface SessionHost {
  readonly logger: Logger;
  readonly options: SessionOptions;
  readonly store: Pick<Store, 'logID' | 'currentIndex' | 'logTrimmedUpTo' | 'snapshotGlobal' | 'logEntriesAfter'>;
  /** Bumped by every commit that touches tokens, policies or roles: the session re-checks its token. */
  readonly aclGeneration: number;
  checkReplicationToken(secret: string, datacenter: string | undefined): TokenCheck;
  /** Takes the secondary's hello: its address as the primary will list it, or why it is refused. */
  admit(session: Session, hello: { datacenter: string; address: string }): { ok: true; address: string } | { ok: false; message: string };
  /** Tells the other sessions of a newcomer (their next ping lists it). */
  announce(newcomer: Session): void;
  connected(datacenter: string, mode: string): void;
  forget(session: Session): void;
  /** When the commit holding this index was durable (ms since the epoch). */
  committedAt(index: number): number;
  /** Last uses of global tokens a secondary saw: the primary keeps the latest. */
  usesReported(uses: ReadonlyArray<readonly [string, number]>): void;
  datacenters(): DatacenterInfo[];
  /** This primary's epoch (docs/datacenters.md). */
  epoch(): number;
  /** Where this primary took over from another, if it did (told in the welcome). */
  takeover(): Takeover | undefined;
  /** A secondary has seen a higher epoch than this primary's: logged and audited (the session refuses it). */
  staleFor(datacenter: string, seen: number): void;
  /** The cluster's versions: what secondaries report of their servers, and the picture sent back. */
  readonly releases?: ReleaseBook | undefined;
}

/**
 * The primary's end of one secondary's stream (docs/datacenters.md, "Multiple datacenters"), and the channel it talks
 * through: socket-free, so tests feed it frames (test/replication/primary-session.test.ts).
 */

export type TokenCheck = { ok: true; expires: number | undefined } | { ok: false; status: number; message: string; detail?: string };

/** WebSocket close code of a session whose token stopped being good enough to replicate. */
export const CLOSE_TOKEN_REVOKED = 4003;

/**
 * The primary's end of one secondary's stream, without a socket: fed the secondary's
 * frames (receive), it admits the secondary, sends a snapshot or the log after its
 * cursor, then every commit, through its FrameChannel, within bounded buffering.
 */
export class Session {
  datacenter = '';
  address = '';
  ackedIndex = 0;
  /** The stream is complete up to this primary index, as far as frames queued to the socket go. */
  sentUpTo = 0;
  readonly connectedAt = new Date();
  private wake: (() => void) | undefined;
  private closed = false;
  private readonly heartbeat: Heartbeat;
  /** The primary's ACL generation the replication token was last checked at. */
  private authCheckedAt: number;
  /** When the replication token expires, ms since the epoch. */
  private tokenExpires: number | undefined;
  /** With TLS: the datacenter the secondary's certificate proved (its hello must name the same). */
  private readonly provenDatacenter: string | undefined;
  /** The protocol version agreed at the upgrade: nothing is sent that it does not carry. */
  readonly version: number;

  constructor(
    private readonly primary: SessionHost,
    private readonly channel: FrameChannel,
    /** Where the connection comes from (the socket's peer address). */
    readonly remoteAddress: string,
    /** The replication token's secret: checked again whenever ACL state changes. */
    private readonly secret: string,
    authorized: { generation: number; expires: number | undefined; datacenter?: string; version?: number },
  ) {
    this.provenDatacenter = authorized.datacenter;
    this.version = authorized.version ?? PROTOCOL_VERSION;
    this.authCheckedAt = authorized.generation;
    this.tokenExpires = authorized.expires;
    this.heartbeat = new Heartbeat({
      everyMs: primary.options.heartbeatMs,
      deadAfterMs: primary.options.deadPeerMs,
      beat: () => {
        if (this.tokenExpires !== undefined && this.tokenExpires <= Date.now()) this.stillAuthorized();
        this.ping();
      },
      silent: () => {
        this.primary.logger.warn({ datacenter: this.datacenter }, 'replication: secondary silent too long; closing');
        this.channel.terminate();
      },
    });
  }

  /**
   * Ends the session unless its token still resolves with acl:write. Called before every
   * frame that carries data: when a commit touched tokens, policies or roles since the
   * last check (so nothing committed after a revocation is ever sent), and when the
   * token's expiry time has passed. Returns whether the session may go on.
   */
  private stillAuthorized(): boolean {
    if (this.closed) return false;
    const expired = this.tokenExpires !== undefined && this.tokenExpires <= Date.now();
    const generation = this.primary.aclGeneration;
    if (!expired && generation === this.authCheckedAt) return true;
    const check = this.primary.checkReplicationToken(this.secret, this.datacenter || undefined);
    if (check.ok) {
      this.authCheckedAt = generation;
      this.tokenExpires = check.expires;
      return !this.closed;
    }
    this.primary.logger.warn(
      { datacenter: this.datacenter, reason: check.detail ?? check.message },
      'replication: closing a session whose token no longer allows it',
    );
    this.close(CLOSE_TOKEN_REVOKED, `replication token revoked: ${check.message}`);
    return false;
  }

  private readonly checks = new Map<number, (inUse: string[]) => void>();
  private nextCheck = 0;

  /** Which of `ids` a Local token of this secondary holds; [] when it does not answer within `timeoutMs`. */
  checkIDs(ids: string[], timeoutMs: number): Promise<string[]> {
    if (this.closed || !this.datacenter) return Promise.resolve([]);
    const req = ++this.nextCheck;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.checks.delete(req);
        resolve([]);
      }, timeoutMs);
      this.checks.set(req, (inUse) => {
        clearTimeout(timer);
        resolve(inUse);
      });
      void this.send({ t: 'check-ids', req, ids }).catch(() => undefined);
    });
  }

  /** Wakes a waiting tail loop: it reads on. */
  notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /**
   * Called on every commit. When the stream is current (the tail loop waits with
   * everything before this commit sent) and there is room, the commit's entries go out
   * at once, from the event, without a turn of the loop or a read of the log; otherwise
   * the loop is woken to catch up.
   */
  push(event: CommitEvent): void {
    const o = this.primary.options;
    const current = this.parked && !this.closed && this.sentUpTo >= event.from;
    if (!current || this.channel.buffered > o.highWaterBytes || this.sentUpTo - this.ackedIndex > o.maxUnackedIndexes) return this.notify();
    if (!this.stillAuthorized()) return;
    const frame: PrimaryFrame = {
      t: 'entries',
      entries: fittedEntries(event.entries, this.version),
      upTo: event.index,
      committedAt: event.at,
    };
    this.sentUpTo = event.index;
    this.channel.send(frame, (err) => {
      if (err) this.close(1011, 'stream failed');
    });
  }

  /**
   * A planned transfer (docs/datacenters.md): once everything up to `upTo` is queued to the socket, the
   * handover follows it (frames are applied in order there). False when the stream ended first
   * or did not get that far within `timeoutMs`.
   */
  async handOver(epoch: number, upTo: number, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    this.notify();
    while (!this.closed && this.sentUpTo < upTo) {
      if (Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, 10));
      this.notify();
    }
    if (this.closed) return false;
    try {
      await this.send({ t: 'handover', epoch, upTo });
      return true;
    } catch {
      return false;
    }
  }

  /** Last uses of global tokens the primary wrote: sent as they are, once this secondary has said hello. */
  sendUses(uses: Array<[string, number]>): void {
    if (this.greeted && !this.closed) void this.send({ t: 'uses', uses }).catch(() => undefined);
  }

  private send(frame: PrimaryFrame): Promise<void> {
    return new Promise((resolve, reject) => this.channel.send(frame, (err) => (err ? reject(err) : resolve())));
  }

  /** Bounded buffering: wait while the socket or the secondary's unacknowledged window is full. */
  private async roomToSend(): Promise<void> {
    const o = this.primary.options;
    while (!this.closed && (this.channel.buffered > o.highWaterBytes || this.sentUpTo - this.ackedIndex > o.maxUnackedIndexes)) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 50);
      });
    }
  }

  /** Set while the tail loop waits for a commit with everything durable sent. */
  private parked = false;

  private async waitForChange(): Promise<void> {
    this.parked = true;
    await new Promise<void>((resolve) => {
      this.wake = resolve;
    });
    this.parked = false;
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.heartbeat.stop();
    this.notify();
    if (this.channel.open) this.channel.close(code, reason);
  }

  private greeted = false;

  /** Starts the heartbeat; the secondary speaks first (hello). */
  start(): void {
    this.heartbeat.start();
  }

  /** Bytes from the connection: one frame, decoded and checked; anything malformed ends the session. */
  receiveRaw(data: unknown): void {
    let frame: SecondaryFrame;
    try {
      frame = decodeFrame(secondaryFrame, data);
    } catch (err) {
      this.heartbeat.heard();
      this.primary.logger.warn(
        { datacenter: this.datacenter, err: (err as Error).message },
        'replication: malformed frame from secondary; closing',
      );
      this.close(1008, err instanceof FrameError ? err.message.slice(0, 120) : 'malformed frame');
      return;
    }
    this.receive(frame);
  }

  /** One frame from the secondary. */
  receive(frame: SecondaryFrame): void {
    this.heartbeat.heard();
    if (frame.t === 'hello') {
      if (this.greeted) return this.close(1008, 'hello sent twice');
      this.greeted = true;
      if (frame.v !== this.version) {
        void this.send({
          t: 'error',
          code: 'VERSION',
          message: `the secondary's hello speaks replication protocol ${frame.v}, not ${this.version} as agreed at its upgrade`,
        }).catch(() => undefined);
        return this.close(1002, 'unsupported protocol version');
      }
      if (frame.epoch > this.primary.epoch()) {
        // The secondary follows a primary promoted after this one (docs/datacenters.md): this one is stale.
        this.primary.staleFor(frame.datacenter, frame.epoch);
        void this.send({
          t: 'error',
          code: 'STALE_PRIMARY',
          message: `this primary's epoch is ${this.primary.epoch()}, and this secondary has seen epoch ${frame.epoch}: it follows a newer primary`,
        }).catch(() => undefined);
        return this.close(1008, 'stale primary');
      }
      this.greet(frame).catch((err: unknown) => {
        if (!this.closed) this.primary.logger.warn({ datacenter: this.datacenter, err }, 'replication: stream to secondary failed');
        this.close(1011, 'stream failed');
      });
    } else if (frame.t === 'ack') {
      this.ackedIndex = Math.max(this.ackedIndex, frame.index);
      this.notify();
    } else if (frame.t === 'uses') {
      if (this.greeted) this.primary.usesReported(frame.uses);
    } else if (frame.t === 'servers') {
      if (this.datacenter !== '') this.primary.releases?.reported(this.datacenter, frame.servers, false);
    } else if (frame.t === 'ids-in-use') {
      const waiting = this.checks.get(frame.req);
      this.checks.delete(frame.req);
      waiting?.(frame.inUse);
    }
  }

  /** The connection closed. */
  ended(): void {
    this.closed = true;
    this.heartbeat.stop();
    this.notify();
    this.primary.forget(this);
  }

  /** Refuses the session with a reason the secondary records in its status. */
  private refuse(code: number, message: string): void {
    this.primary.logger.warn({ datacenter: this.datacenter || undefined, reason: message }, 'replication: refused a secondary');
    void this.send({ t: 'error', code: 'REFUSED', message }).catch(() => undefined);
    this.close(code, message.length > 120 ? `${message.slice(0, 117)}...` : message);
  }

  /** A heartbeat, which also tells the secondary every datacenter the primary knows. */
  ping(): void {
    this.tellCluster();
    void this.send({
      t: 'ping',
      time: Date.now(),
      upTo: this.sentUpTo,
      primaryIndex: this.primary.store.currentIndex(),
      datacenters: this.primary.datacenters(),
      epoch: this.primary.epoch(),
    }).catch(() => undefined);
  }

  /** The cluster's picture as last sent to this secondary (its revision). */
  private clusterSent = '';

  /** Sends the cluster's picture when it moved since this secondary last had it (version 5 and later). */
  private tellCluster(): void {
    const book = this.primary.releases;
    if (book === undefined || this.version < 5 || this.datacenter === '') return;
    const revision = book.revision();
    if (revision === this.clusterSent) return;
    this.clusterSent = revision;
    void this.send({ t: 'cluster', picture: book.picture() }).catch(() => undefined);
  }

  /** Admits a secondary by name and address (see ReplicationPrimary.admit), then streams. */
  private async greet(hello: Extract<SecondaryFrame, { t: 'hello' }>): Promise<void> {
    if (this.provenDatacenter !== undefined && hello.datacenter !== this.provenDatacenter) {
      return this.refuse(1008, `the hello names datacenter ${hello.datacenter}, but the certificate proved ${this.provenDatacenter}`);
    }
    const check = this.primary.checkReplicationToken(this.secret, hello.datacenter);
    if (!check.ok) return this.refuse(CLOSE_TOKEN_REVOKED, check.message);
    if (this.closed) return;
    const admitted = this.primary.admit(this, hello);
    if (!admitted.ok) return this.refuse(1008, admitted.message);
    this.datacenter = hello.datacenter;
    this.address = admitted.address;
    // A secondary of 0.1.0 reports no servers: its leader is what is known of its datacenter.
    if (this.version < 5) this.primary.releases?.reported(this.datacenter, [previousRelease(`leader at ${this.address}`)], true);
    // The others learn of the newcomer now, not at their next heartbeat (?dc= and the catalog).
    this.primary.announce(this);
    await this.run(hello);
  }

  /** Silent for longer than this: no longer counts as a live session of its datacenter. */
  isLive(): boolean {
    return !this.closed && (this.heartbeat.sinceHeardMs() ?? 0) < 3 * this.primary.options.heartbeatMs;
  }

  private async run(hello: Extract<SecondaryFrame, { t: 'hello' }>): Promise<void> {
    const { store, options } = this.primary;
    // Resume from the secondary's cursor when the log still holds everything after it;
    // otherwise (rebuilt primary, trimmed log, a cursor from the future) send a snapshot.
    const canTail = hello.logID === store.logID && hello.index >= store.logTrimmedUpTo() && hello.index <= store.currentIndex();
    const since = this.primary.takeover();
    await this.send({
      t: 'welcome',
      v: this.version,
      logID: store.logID,
      primaryIndex: store.currentIndex(),
      mode: canTail ? 'tail' : 'snapshot',
      datacenters: this.primary.datacenters(),
      epoch: this.primary.epoch(),
      ...(since ? { since } : {}),
    });
    this.primary.logger.info(
      { datacenter: this.datacenter, mode: canTail ? 'tail' : 'snapshot', from: hello.index },
      'replication: secondary connected',
    );
    this.primary.connected(this.datacenter, canTail ? 'tail' : 'snapshot');
    if (canTail) {
      this.sentUpTo = hello.index;
      this.ackedIndex = hello.index;
    } else {
      const snap = store.snapshotGlobal();
      const chunk = options.snapshotChunk;
      const total = Math.max(...TABLE_NAMES.map((t) => snap[t].length));
      for (let i = 0; i === 0 || i < total; i += chunk) {
        await this.roomToSend();
        if (!this.stillAuthorized()) return;
        const last = i + chunk >= total;
        await this.send({
          t: 'snapshot',
          logID: snap.logID,
          index: snap.index,
          ...fittedRecords(sliceRecords(snap, i, i + chunk), this.version),
          bootstrap: last ? snap.bootstrap : null,
          last,
        });
      }
      this.sentUpTo = snap.index;
    }
    await this.tail();
  }

  private async tail(): Promise<void> {
    const { store, options } = this.primary;
    while (!this.closed) {
      await this.roomToSend();
      if (this.closed) return;
      const durable = store.currentIndex();
      const entries = await store.logEntriesAfter(this.sentUpTo, options.batchEntries);
      const complete = entries.length < options.batchEntries;
      const lastEntry = entries.length > 0 ? (entries[entries.length - 1] as { Index: number }).Index : this.sentUpTo;
      const upTo = complete ? Math.max(durable, lastEntry) : lastEntry;
      // Checked after reading: the check sees state at least as new as the entries read.
      if (!this.stillAuthorized()) return;
      if (entries.length > 0 || upTo > this.sentUpTo) {
        this.sentUpTo = upTo;
        await this.send({
          t: 'entries',
          entries: fittedEntries(entries, this.version),
          upTo,
          committedAt: this.primary.committedAt(entries[0]?.Index ?? upTo),
        });
      }
      if (complete && store.currentIndex() <= this.sentUpTo) await this.waitForChange();
    }
  }

  info(): SecondaryInfo {
    return {
      Datacenter: this.datacenter,
      Address: this.address,
      AckedIndex: this.ackedIndex,
      LagEntries: Math.max(0, this.primary.store.currentIndex() - this.ackedIndex),
      LastContactMs: this.heartbeat.sinceHeardMs() ?? 0,
      ConnectedAt: this.connectedAt.toISOString(),
    };
  }
}

/** Records `from` to `to` of each table (a snapshot chunk). */
function sliceRecords(all: GlobalSnapshot, from: number, to: number): RecordsByTable {
  return Object.fromEntries(TABLE_NAMES.map((t) => [t, all[t].slice(from, to)])) as unknown as RecordsByTable;
}
