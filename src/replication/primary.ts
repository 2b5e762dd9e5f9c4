import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { Transport } from '../transport/transport.js';
import { Heartbeat } from './heartbeat.js';
import { WebSocket, WebSocketServer } from 'ws';
import { isWatchwordError } from '../domain/errors.js';
import { expiryMillis } from '../domain/expiry.js';
import { isValidDatacenterName } from '../domain/grants.js';
import type { TokenRecord } from '../domain/types.js';
import { isWildcardHost, parseHostPort } from '../config/schema.js';
import type { AclResolver } from '../service/acl-resolver.js';
import type { CommitEvent, Store } from '../store/store.js';
import {
  type DatacenterInfo,
  FrameError,
  PROTOCOL_VERSION,
  type PrimaryFrame,
  REPLICATION_PATH,
  type SecondaryFrame,
  decodeFrame,
  encodeFrame,
  secondaryFrame,
  secretOf,
} from './protocol.js';

export interface PrimaryOptions {
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
  /** Change-log entries to keep (by index distance). */
  retention: number;
}

export const DEFAULT_PRIMARY_OPTIONS: PrimaryOptions = {
  heartbeatMs: 1000,
  // Checked at every heartbeat: with a ping a second each way, a peer that goes silent
  // is noticed about 8 s later, within the 10 s promised even on a busy machine.
  deadPeerMs: 7000,
  batchEntries: 1000,
  snapshotChunk: 2000,
  highWaterBytes: 8 * 1024 * 1024,
  maxUnackedIndexes: 50_000,
  retention: 100_000,
};

/** What the primary reports of each connected secondary. */
export interface SecondaryInfo {
  Datacenter: string;
  Address: string;
  AckedIndex: number;
  LagEntries: number;
  LastContactMs: number;
  ConnectedAt: string;
}

export function refuse(socket: Duplex, status: number, reason: string, headers: Record<string, string> = {}): void {
  const body = `${reason}\n`;
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`,
  );
}


/**
 * Datacenters a replication token may replicate as: the datacenters of its node
 * identities. A token without node identities is not bound.
 */
export const boundDatacenters = (token: TokenRecord): string[] => [...new Set(token.NodeIdentities.map((n) => n.Datacenter))];

/** Whether a replication token may stream, and until when. */
type TokenCheck = { ok: true; expires: number | undefined } | { ok: false; status: number; message: string };

/** WebSocket close code of a session whose token stopped being good enough to replicate. */
export const CLOSE_TOKEN_REVOKED = 4003;

/**
 * Where a session's frames go: a WebSocket in the daemon (wsChannel), an array in unit
 * tests. The session never touches a socket itself.
 */
export interface FrameChannel {
  /** Queues a frame; `done` is told once it is written, or why it could not be. */
  send(frame: PrimaryFrame, done: (err?: Error) => void): void;
  /** Bytes queued and not yet written (flow control). */
  readonly buffered: number;
  readonly open: boolean;
  close(code: number, reason: string): void;
  /** Ends the connection at once. */
  terminate(): void;
}

/** A WebSocket as a session's channel: its frames in, the session's frames out. */
export function wsChannel(ws: WebSocket, session: () => Session | undefined): FrameChannel {
  ws.on('message', (data) => session()?.receiveRaw(data));
  ws.on('close', () => session()?.ended());
  ws.on('error', () => undefined);
  return {
    send: (frame, done) => {
      if (ws.readyState !== WebSocket.OPEN) return done(new Error('socket closed'));
      ws.send(encodeFrame(frame), (err) => done(err ?? undefined));
    },
    get buffered() {
      return ws.bufferedAmount;
    },
    get open() {
      return ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING;
    },
    close: (code, reason) => ws.close(code, reason),
    terminate: () => ws.terminate(),
  };
}

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

  constructor(
    private readonly primary: ReplicationPrimary,
    private readonly channel: FrameChannel,
    /** Where the connection comes from (the socket's peer address). */
    readonly remoteAddress: string,
    /** The replication token's secret: checked again whenever ACL state changes. */
    private readonly secret: string,
    authorized: { generation: number; expires: number | undefined; datacenter?: string },
  ) {
    this.provenDatacenter = authorized.datacenter;
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
    this.primary.logger.warn({ datacenter: this.datacenter, reason: check.message }, 'replication: closing a session whose token no longer allows it');
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
    const frame: PrimaryFrame = { t: 'entries', entries: event.entries, upTo: event.index, committedAt: event.at };
    this.sentUpTo = event.index;
    this.channel.send(frame, (err) => {
      if (err) this.close(1011, 'stream failed');
    });
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
      this.primary.logger.warn({ datacenter: this.datacenter, err: (err as Error).message }, 'replication: malformed frame from secondary; closing');
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
      if (frame.v !== PROTOCOL_VERSION) {
        void this.send({ t: 'error', code: 'VERSION', message: `unsupported replication protocol version ${frame.v}; this primary speaks ${PROTOCOL_VERSION}` }).catch(() => undefined);
        return this.close(1002, 'unsupported protocol version');
      }
      this.greet(frame).catch((err: unknown) => {
        if (!this.closed) this.primary.logger.warn({ datacenter: this.datacenter, err }, 'replication: stream to secondary failed');
        this.close(1011, 'stream failed');
      });
    } else if (frame.t === 'ack') {
      this.ackedIndex = Math.max(this.ackedIndex, frame.index);
      this.notify();
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
    void this.send({ t: 'ping', time: Date.now(), upTo: this.sentUpTo, primaryIndex: this.primary.store.currentIndex(), datacenters: this.primary.datacenters() }).catch(() => undefined);
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
    await this.send({
      t: 'welcome',
      v: PROTOCOL_VERSION,
      logID: store.logID,
      primaryIndex: store.currentIndex(),
      mode: canTail ? 'tail' : 'snapshot',
      datacenters: this.primary.datacenters(),
    });
    this.primary.logger.info({ datacenter: this.datacenter, mode: canTail ? 'tail' : 'snapshot', from: hello.index }, 'replication: secondary connected');
    if (canTail) {
      this.sentUpTo = hello.index;
      this.ackedIndex = hello.index;
    } else {
      const snap = store.snapshotGlobal();
      const chunk = options.snapshotChunk;
      const total = Math.max(snap.tokens.length, snap.policies.length, snap.roles.length, snap.authMethods.length, snap.bindingRules.length);
      for (let i = 0; i === 0 || i < total; i += chunk) {
        await this.roomToSend();
        if (!this.stillAuthorized()) return;
        const last = i + chunk >= total;
        await this.send({
          t: 'snapshot',
          logID: snap.logID,
          index: snap.index,
          tokens: snap.tokens.slice(i, i + chunk),
          policies: snap.policies.slice(i, i + chunk),
          roles: snap.roles.slice(i, i + chunk),
          authMethods: snap.authMethods.slice(i, i + chunk),
          bindingRules: snap.bindingRules.slice(i, i + chunk),
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
        await this.send({ t: 'entries', entries, upTo, committedAt: this.primary.committedAt((entries[0]?.Index ?? upTo)) });
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

/**
 * The primary's end of replication: authenticates secondaries on the WebSocket
 * upgrade, streams its change log to each (snapshot first when needed), and trims the
 * log to its retention.
 */
export class ReplicationPrimary {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  private readonly sessions = new Set<Session>();
  private readonly unsubscribe: () => void;
  private trimming = false;
  private lastTrim = 0;
  /** Recent commits as [highest index, when durable], oldest first (bounded). */
  private readonly commitTimes: Array<[number, number]> = [];
  /** Bumped by every commit that touches tokens, policies or roles: sessions re-check their token. */
  aclGeneration = 0;

  constructor(
    readonly store: Store,
    private readonly resolver: AclResolver,
    readonly logger: Logger,
    readonly options: PrimaryOptions,
    private readonly self: { datacenter: string; address: () => string; transport?: Transport },
  ) {
    this.unsubscribe = store.onCommit((event) => {
      if (event.tables.has('tokens') || event.tables.has('policies') || event.tables.has('roles')) this.aclGeneration++;
      this.commitTimes.push([event.index, event.at]);
      if (this.commitTimes.length > 4096) this.commitTimes.splice(0, 1024);
      if (event.logReset) {
        // A restore started a new log: every secondary starts over with a snapshot of it.
        for (const s of this.sessions) s.close(1012, 'the primary restored a snapshot; resynchronising');
        this.store
          .trimLog(event.index)
          .catch((err: unknown) => this.logger.error({ err }, 'replication: removing the change log before a restore failed'));
        return;
      }
      for (const s of this.sessions) s.push(event);
      this.maybeTrim();
    });
  }

  /** Serves the replication route on the daemon's HTTP server. */
  attach(server: Server): void {
    server.on('upgrade', (req, socket, head) => {
      void this.upgrade(req, socket, head);
    });
  }

  async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => undefined);
    const url = new URL(req.url ?? '/', 'http://primary');
    if (url.pathname !== REPLICATION_PATH) return refuse(socket, 404, `no WebSocket endpoint at ${url.pathname}`);
    const version = url.searchParams.get('version');
    if (version !== String(PROTOCOL_VERSION)) {
      return refuse(socket, 426, `unsupported replication protocol version ${version ?? '(none)'}; this primary speaks ${PROTOCOL_VERSION}`);
    }
    // A secondary names itself in a header too, so a token bound elsewhere is refused before the upgrade.
    const header = req.headers['x-service-datacenter'];
    const named = typeof header === 'string' && header !== '' ? header : undefined;
    // With TLS a secondary proves its datacenter with its certificate before anything else (SPEC §16).
    const transport = this.self.transport;
    if (transport?.secure) {
      if (named === undefined) return refuse(socket, 400, 'the secondary did not name its datacenter (X-Service-Datacenter)');
      const proven = transport.proveIncoming(req, named);
      if (proven && !proven.ok) {
        this.logger.warn({ datacenter: named, from: req.socket.remoteAddress }, `replication: refused a secondary: ${proven.reason}`);
        return refuse(socket, 403, `not a server of ${named}: ${proven.reason}`);
      }
    }
    const secret = secretOf(req);
    if (!secret) return refuse(socket, 403, 'replication token is missing');
    const generation = this.aclGeneration;
    const check = this.checkReplicationToken(secret, named);
    if (!check.ok) return refuse(socket, check.status, check.message);
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      let session: Session | undefined;
      session = this.open(wsChannel(ws, () => session), req.socket.remoteAddress ?? '', secret, {
        generation,
        expires: check.expires,
        ...(transport?.secure && named !== undefined ? { datacenter: named } : {}),
      });
    });
  }

  /** A session on an authenticated channel (the upgrade checked the token at `authorized.generation`). */
  open(channel: FrameChannel, remoteAddress: string, secret: string, authorized: { generation: number; expires: number | undefined }): Session {
    const session = new Session(this, channel, remoteAddress, secret, authorized);
    this.sessions.add(session);
    session.start();
    return session;
  }

  /**
   * Why a secret may not replicate (undefined when it may): it must resolve to a live
   * token with acl:write in the default namespace and partition.
   */
  checkReplicationToken(secret: string, datacenter: string | undefined): TokenCheck {
    try {
      const identity = this.resolver.resolveLocal(secret);
      if (!identity.authorizer.canWrite('default', 'default')) return { ok: false, status: 403, message: 'replication token lacks acl:write' };
      const bound = boundDatacenters(identity.token);
      if (datacenter !== undefined && bound.length > 0 && !bound.includes(datacenter)) {
        return { ok: false, status: 403, message: `replication token is bound to datacenter ${bound.join(', ')}, not ${datacenter}` };
      }
      return { ok: true, expires: expiryMillis(identity.token) };
    } catch (err) {
      if (isWatchwordError(err) && err.code === 'ACL_NOT_FOUND') return { ok: false, status: 403, message: 'replication token is invalid' };
      this.logger.error({ err }, 'replication: cannot authenticate a secondary');
      return { ok: false, status: 500, message: 'internal error' };
    }
  }

  /**
   * Whether a secondary may stream under the name and address it gives. Refused: the
   * primary's own name, a name another live session holds (a silent one is replaced),
   * and an address that is not HOST:PORT. A wildcard host (0.0.0.0, ::) is replaced by
   * the address the connection comes from: it names no reachable daemon.
   */
  admit(session: Session, hello: { datacenter: string; address: string }): { ok: true; address: string } | { ok: false; message: string } {
    const dc = hello.datacenter;
    if (!isValidDatacenterName(dc)) return { ok: false, message: `invalid datacenter name ${JSON.stringify(dc.slice(0, 64))}` };
    if (dc === this.self.datacenter) return { ok: false, message: `datacenter ${dc} is the primary itself; a secondary needs a name of its own` };
    const parsed = parseHostPort(hello.address);
    if (!parsed || parsed.port === 0) return { ok: false, message: `address ${JSON.stringify(hello.address.slice(0, 64))} is not HOST:PORT` };
    for (const other of this.sessions) {
      if (other === session || other.datacenter !== dc) continue;
      if (other.isLive()) return { ok: false, message: `datacenter ${dc} already has a live replication session` };
      other.close(1001, 'replaced by a new session of the same datacenter');
    }
    const host = isWildcardHost(parsed.host) ? session.remoteAddress.replace(/^::ffff:/, '') : parsed.host;
    if (host === '') return { ok: false, message: `address ${JSON.stringify(hello.address)} names no host` };
    return { ok: true, address: host.includes(':') ? `[${host}]:${parsed.port}` : `${host}:${parsed.port}` };
  }

  /** Every other admitted session hears the list of datacenters at once. */
  announce(newcomer: Session): void {
    for (const s of this.sessions) if (s !== newcomer && s.datacenter) s.ping();
  }

  forget(session: Session): void {
    if (this.sessions.delete(session) && session.datacenter) {
      this.logger.info({ datacenter: session.datacenter }, 'replication: secondary disconnected');
    }
  }

  /** When the change at `index` became durable (now, when it is older than what is remembered). */
  committedAt(index: number): number {
    const times = this.commitTimes;
    let lo = 0;
    let hi = times.length - 1;
    let found: number | undefined;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const [idx, at] = times[mid] as [number, number];
      if (idx >= index) {
        found = at;
        hi = mid - 1;
      } else {
        lo = mid + 1;
      }
    }
    return found ?? Date.now();
  }

  /** This datacenter and every connected secondary, primary first. */
  datacenters(): DatacenterInfo[] {
    const out: DatacenterInfo[] = [{ name: this.self.datacenter, address: this.self.address() }];
    const seen = new Set([this.self.datacenter]);
    for (const s of [...this.sessions].sort((a, b) => (a.datacenter < b.datacenter ? -1 : 1))) {
      if (!s.datacenter || seen.has(s.datacenter)) continue;
      seen.add(s.datacenter);
      out.push({ name: s.datacenter, address: s.address });
    }
    return out;
  }

  /**
   * Which of `ids` (a global token's chosen AccessorID and SecretID) a Local token of
   * any connected secondary holds. A secondary that does not answer in time counts as
   * holding none; should it hold one after all, it keeps its Local token and reports the
   * conflict (see apply.ts).
   */
  async idsHeldBySecondaries(ids: string[], timeoutMs = 2000): Promise<Array<{ datacenter: string; id: string }>> {
    const answers = await Promise.all(
      [...this.sessions].filter((s) => s.datacenter).map(async (s) => (await s.checkIDs(ids, timeoutMs)).map((id) => ({ datacenter: s.datacenter, id }))),
    );
    return answers.flat();
  }

  /** Whether a connected secondary's replication stream comes from this address. */
  isPeerAddress(ip: string): boolean {
    for (const s of this.sessions) if (s.datacenter && s.remoteAddress.replace(/^::ffff:/, '') === ip) return true;
    return false;
  }

  secondaries(): SecondaryInfo[] {
    return [...this.sessions].filter((s) => s.datacenter).map((s) => s.info());
  }

  private maybeTrim(): void {
    const { retention } = this.options;
    const index = this.store.currentIndex();
    // Trim in steps of a tenth of the retention, at most once a second, never re-entrantly.
    if (this.trimming || index - this.store.logTrimmedUpTo() <= retention + Math.ceil(retention / 10)) return;
    if (Date.now() - this.lastTrim < 1000) return;
    this.trimming = true;
    this.lastTrim = Date.now();
    this.store
      .trimLog(index - retention)
      .then((n) => this.logger.debug({ removed: n, upTo: index - retention }, 'replication: change log trimmed'))
      .catch((err: unknown) => this.logger.error({ err }, 'replication: trimming the change log failed'))
      .finally(() => {
        this.trimming = false;
      });
  }

  async close(): Promise<void> {
    this.unsubscribe();
    for (const s of this.sessions) s.close(1001, 'primary shutting down');
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}
