import type { Logger } from 'pino';
import { WebSocket } from 'ws';
import type { Metrics } from '../observability/metrics.js';
import { META } from '../store/schema.js';
import type { Store } from '../store/store.js';
import { type ApplyOutcome, type Cursor, type GlobalState, type SecretConflict, applyEntries, applySnapshot } from './apply.js';
import type { ReplicationStatusResponse } from '../api/schemas.js';
import { Backoff } from './backoff.js';
import { Heartbeat } from './heartbeat.js';
import {
  type DatacenterInfo,
  PROTOCOL_VERSION,
  type PrimaryFrame,
  REPLICATION_PATH,
  type SecondaryFrame,
  decodeFrame,
  encodeFrame,
  primaryFrame,
} from './protocol.js';

export interface SecondaryOptions {
  datacenter: string;
  primaryDatacenter: string;
  /** HTTP base URL of the primary. */
  primaryAddress: string;
  /** Replication token; without one the secondary does not connect. */
  token?: string;
  /** This daemon's HTTP address, told to the primary for ?dc= forwarding. */
  address: () => string;
  heartbeatMs: number;
  deadPeerMs: number;
  backoffMinMs: number;
  backoffMaxMs: number;
}

const ZERO_TIME = '0001-01-01T00:00:00Z';

/**
 * The secondary's end of replication. Frames are handled strictly in order; every
 * batch is applied in one transaction together with the cursor, so a crash at any
 * moment resumes exactly where the disk says.
 */
export class ReplicationSecondary {
  private ws: WebSocket | undefined;
  private cursor: Cursor = { logID: '', index: 0 };
  /** Local state equals the primary's up to this primary index. */
  private appliedUpTo = 0;
  private welcomeLogID = '';
  private primaryIndex = 0;
  private datacenterList: DatacenterInfo[] = [];
  private snapshotBuffer: GlobalState | undefined;
  /** Frames received and not yet handled, in order; one worker drains it. */
  private inbox: PrimaryFrame[] = [];
  private working: Promise<void> | undefined;
  private connected = false;
  private running = false;
  private stopped = false;
  private lastSuccess = ZERO_TIME;
  private lastError = ZERO_TIME;
  private lastErrorMessage = '';
  private reconnectTimer: NodeJS.Timeout | undefined;
  /** The current connection's (the last one's, while disconnected). */
  private heartbeat: Heartbeat | undefined;
  private readonly backoff: Backoff;
  private readonly waiters = new Set<{ index: number; resolve: (ok: boolean) => void }>();

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    private readonly options: SecondaryOptions,
  ) {
    this.backoff = new Backoff(options.backoffMinMs, options.backoffMaxMs);
  }

  async start(): Promise<void> {
    const saved = this.store.getMeta(META.cursor) as Cursor | undefined;
    if (saved !== undefined) this.cursor = saved;
    this.appliedUpTo = this.cursor.index;
    this.metrics.replicationAppliedIndex.set(this.appliedUpTo);
    if (!this.options.token) {
      this.fail('no replication token configured (set replication_token / --replication-token / WATCHWORD_REPLICATION_TOKEN)');
      return;
    }
    this.running = true;
    this.connect();
  }

  private fail(message: string): void {
    this.lastError = new Date().toISOString();
    this.lastErrorMessage = message;
  }

  /** The primary datacenter's leader, when a follower there named it (HA, §13); else primaryAddress. */
  private redirect: string | undefined;
  private attempt = 0;

  private connect(): void {
    if (this.stopped) return;
    // Several addresses (every server of the primary datacenter): the next one after each failure.
    const configured = this.options.primaryAddress.split(',').map((u) => u.trim());
    const redirected = this.redirect !== undefined;
    const target = this.redirect ?? (configured[this.attempt++ % configured.length] as string);
    // A named leader is tried once; after that the configured address again.
    this.redirect = undefined;
    const base = new URL(target);
    base.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
    base.pathname = REPLICATION_PATH;
    base.search = `?version=${PROTOCOL_VERSION}`;
    const ws = new WebSocket(base, {
      headers: { 'X-Service-Token': this.options.token as string, 'X-Service-Datacenter': this.options.datacenter },
      handshakeTimeout: 5000,
      maxPayload: 256 * 1024 * 1024,
      perMessageDeflate: false,
    });
    this.ws = ws;
    this.inbox = [];
    this.snapshotBuffer = undefined;

    let refused = false;
    ws.on('unexpected-response', (_req, res) => {
      refused = true;
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c.slice(0, 1000)));
      res.on('end', () => {
        const leader = res.headers['x-service-leader'];
        if (res.statusCode === 421 && typeof leader === 'string' && /^[\w.\-:[\]]+$/.test(leader) && !redirected) {
          // A follower of the primary datacenter: go to the leader it names, at once. Once per
          // attempt: a stale name (a leader that has just lost its lease) does not start a loop.
          this.redirect = `http://${leader}`;
        }
        this.fail(`the primary refused replication (HTTP ${res.statusCode}): ${body.trim() || res.statusMessage}`);
        this.logger.warn({ status: res.statusCode, reason: body.trim() }, 'replication: refused by the primary');
        ws.terminate();
      });
    });
    const heartbeat = new Heartbeat({
      everyMs: this.options.heartbeatMs,
      deadAfterMs: this.options.deadPeerMs,
      beat: () => this.send({ t: 'ping', time: Date.now() }),
      silent: () => {
        this.fail('the primary went silent; reconnecting');
        ws.terminate();
      },
    });
    ws.on('open', () => {
      this.heartbeat?.stop();
      this.heartbeat = heartbeat;
      heartbeat.start();
      this.send({ t: 'hello', v: PROTOCOL_VERSION, datacenter: this.options.datacenter, address: this.options.address(), logID: this.cursor.logID || null, index: this.cursor.index });
    });
    ws.on('message', (data) => {
      heartbeat.heard();
      let frame: PrimaryFrame;
      try {
        frame = decodeFrame(primaryFrame, data);
      } catch (err) {
        this.fail(`malformed frame from the primary: ${(err as Error).message}`);
        this.logger.error({ err: (err as Error).message }, 'replication: malformed frame from the primary; closing');
        ws.close(1008, 'malformed frame');
        return;
      }
      if (frame.t === 'check-ids') {
        // Answered at once, not behind the frames being applied.
        this.send({ t: 'ids-in-use', req: frame.req, inUse: frame.ids.filter((id) => this.heldByLocalToken(id)) });
        return;
      }
      this.inbox.push(frame);
      this.working ??= this.drain(ws).finally(() => {
        this.working = undefined;
      });
    });
    ws.on('error', (err) => {
      // A refused upgrade already said why; the error that follows its teardown says nothing new.
      if (!this.connected && !refused) this.fail(`cannot reach the primary at ${this.options.primaryAddress}: ${err.message}`);
    });
    ws.on('close', (code, reason) => {
      const wasConnected = this.connected;
      this.connected = false;
      this.metrics.replicationConnected.set(0);
      heartbeat.stop();
      if (wasConnected && code !== 1000) {
        const why = reason.toString();
        if (!this.lastErrorMessage || why) this.fail(`connection to the primary closed (${code}${why ? `: ${why}` : ''})`);
      }
      if (this.ws === ws) this.ws = undefined;
      // Frames of a closed connection are dropped: the next one resumes from the cursor.
      this.inbox = [];
      this.scheduleReconnect();
    });
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.reconnectTimer) return;
    const delay = this.backoff.next();
    this.reconnectTimer = setTimeout(
      () => {
        this.reconnectTimer = undefined;
        this.connect();
      },
      this.redirect ? 50 : delay,
    );
  }

  private send(frame: SecondaryFrame): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(encodeFrame(frame), () => undefined);
  }

  private succeed(): void {
    this.lastSuccess = new Date().toISOString();
    this.lastErrorMessage = '';
    this.backoff.reset();
  }

  private advance(upTo: number): void {
    if (upTo <= this.appliedUpTo) return;
    this.appliedUpTo = upTo;
    this.metrics.replicationAppliedIndex.set(upTo);
    this.metrics.replicationLagEntries.set(Math.max(0, this.primaryIndex - upTo));
    for (const w of this.waiters) {
      if (upTo >= w.index) {
        this.waiters.delete(w);
        w.resolve(true);
      }
    }
  }

  /**
   * Handles queued frames in order. Entries frames that queued up while the previous
   * batch was being written are applied together in one transaction, so a secondary
   * keeps up with a busy primary at one sync per batch rather than one per frame.
   */
  private async drain(ws: WebSocket): Promise<void> {
    try {
      while (this.inbox.length > 0 && this.ws === ws) {
        const frame = this.inbox.shift() as PrimaryFrame;
        if (frame.t !== 'entries') {
          await this.handle(frame);
          continue;
        }
        const batch = [frame];
        while (this.inbox[0]?.t === 'entries') batch.push(this.inbox.shift() as typeof frame);
        await this.applyEntryFrames(batch);
      }
    } catch (err) {
      this.fail(`applying replicated changes failed: ${(err as Error).message}`);
      this.logger.error({ err }, 'replication: apply failed; reconnecting');
      ws.terminate();
    }
  }

  private async applyEntryFrames(frames: Array<Extract<PrimaryFrame, { t: 'entries' }>>): Promise<void> {
    const entries = frames.flatMap((f) => f.entries);
    const upTo = Math.max(...frames.map((f) => f.upTo), this.cursor.index);
    const cursor = { logID: this.welcomeLogID, index: upTo };
    // Nothing to write: the cursor on disk may lag; resuming from it is harmless.
    if (entries.length > 0) this.noteConflicts(await this.store.transact((tx) => applyEntries(tx, entries, cursor), { sync: false }), false);
    const now = Date.now();
    for (const f of frames) {
      if (f.committedAt === undefined || f.entries.length === 0) continue;
      const lag = Math.max(0, now - f.committedAt);
      this.metrics.replicationLagMs.set(lag);
      for (let i = 0; i < f.entries.length; i++) this.metrics.replicationApplyLag.observe(lag / 1000);
    }
    this.cursor = cursor;
    this.primaryIndex = Math.max(this.primaryIndex, upTo);
    this.advance(upTo);
    this.send({ t: 'ack', index: this.appliedUpTo });
    this.succeed();
  }

  private async handle(frame: PrimaryFrame): Promise<void> {
    switch (frame.t) {
      case 'welcome':
        this.welcomeLogID = frame.logID;
        this.primaryIndex = frame.primaryIndex;
        this.datacenterList = frame.datacenters;
        if (frame.logID !== this.cursor.logID) {
          // Another log (a rebuilt primary): what was applied says nothing about it.
          this.appliedUpTo = 0;
          this.metrics.replicationAppliedIndex.set(0);
        }
        // Connected once the primary has answered the hello, not when the socket opens.
        this.connected = true;
        this.metrics.replicationConnected.set(1);
        if (frame.mode === 'snapshot') {
          this.snapshotBuffer = { tokens: [], policies: [], roles: [], bootstrap: null };
          this.logger.info({ from: this.cursor.index }, 'replication: receiving a snapshot from the primary');
        }
        this.succeed();
        return;
      case 'snapshot': {
        const buf = (this.snapshotBuffer ??= { tokens: [], policies: [], roles: [], bootstrap: null });
        buf.tokens.push(...frame.tokens);
        buf.policies.push(...frame.policies);
        buf.roles.push(...frame.roles);
        if (frame.bootstrap) buf.bootstrap = frame.bootstrap;
        if (!frame.last) return;
        this.snapshotBuffer = undefined;
        const cursor = { logID: frame.logID, index: frame.index };
        const outcome = await this.store.transact((tx) => applySnapshot(tx, buf, cursor), { sync: false });
        this.noteConflicts(outcome, true);
        const changed = outcome.changed;
        this.cursor = cursor;
        this.appliedUpTo = 0;
        this.advance(frame.index);
        this.send({ t: 'ack', index: frame.index });
        this.succeed();
        this.logger.info({ index: frame.index, changed, tokens: buf.tokens.length }, 'replication: snapshot applied');
        return;
      }
      case 'entries':
        return this.applyEntryFrames([frame]);
      case 'ping':
        this.primaryIndex = Math.max(this.primaryIndex, frame.primaryIndex);
        this.datacenterList = frame.datacenters;
        // Every earlier frame is applied by now (frames are handled in order).
        if (this.cursor.logID === this.welcomeLogID && this.snapshotBuffer === undefined) this.advance(frame.upTo);
        this.metrics.replicationLagEntries.set(Math.max(0, this.primaryIndex - this.appliedUpTo));
        return;
      case 'error':
        this.fail(`the primary reported: ${frame.message}`);
        return;
      case 'check-ids':
        return;
    }
  }

  /** Global tokens skipped because a Local token here holds their secret, by AccessorID. */
  private readonly conflicts = new Map<string, SecretConflict>();

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

  isConnected(): boolean {
    return this.connected;
  }

  lastContactMs(): number {
    return this.heartbeat?.sinceHeardMs() ?? 0;
  }

  datacenters(): DatacenterInfo[] {
    return this.datacenterList;
  }

  appliedIndex(): number {
    return this.appliedUpTo;
  }

  /** GET /v1/acl/replication, with Consul's field names. */
  status(): ReplicationStatusResponse {
    return {
      Enabled: true,
      Running: this.running,
      SourceDatacenter: this.options.primaryDatacenter,
      ReplicationType: 'tokens',
      ReplicatedIndex: this.appliedUpTo,
      ReplicatedRoleIndex: this.appliedUpTo,
      ReplicatedTokenIndex: this.appliedUpTo,
      LastSuccess: this.lastSuccess,
      LastError: this.lastError,
      LastErrorMessage: this.lastErrorMessage,
      Connected: this.connected,
      PrimaryIndex: this.primaryIndex,
      LagEntries: Math.max(0, this.primaryIndex - this.appliedUpTo),
      LastContactMs: this.lastContactMs(),
      ...(this.conflicts.size > 0 ? { SecretConflicts: [...this.conflicts.values()] } : {}),
    };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    this.heartbeat?.stop();
    for (const w of this.waiters) w.resolve(false);
    this.waiters.clear();
    const ws = this.ws;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
      ws.close(1000, 'secondary shutting down');
      await Promise.race([closed, new Promise((r) => setTimeout(r, 1000))]);
      ws.terminate();
    }
    await this.working;
  }
}
