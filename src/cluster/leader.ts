import { Heartbeat } from '../replication/heartbeat.js';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { type WebSocket, WebSocketServer } from 'ws';
import { WatchwordError } from '../domain/errors.js';
import { type FrameError, decodeFrame, encodeFrame } from '../replication/protocol.js';
import { PROOF_HEADERS } from '../transport/server-key.js';
import type { Transport } from '../transport/transport.js';
import type { LevelStore } from '../store/level-store.js';
import type { BatchReplicator, ServerBatch, ServerPosition } from '../store/store.js';
import { type FollowerFrame, type LeaderFrame, SERVER_PROTOCOL_VERSION, followerFrame } from './server-protocol.js';

export interface LeaderOptions {
  name: string;
  /** This server's address (host:port), as registered: a follower's proof must be made for it. */
  address: () => string;
  term: number;
  /** Followers the leader keeps in its synchronous set when it can (default 1). */
  syncFollowers: number;
  /** A synchronous follower that has not confirmed a batch within this is dropped from the set. */
  syncTimeoutMs: number;
  heartbeatMs: number;
  deadPeerMs: number;
  /** Batches kept for followers to resume from without a snapshot. */
  tailBatches: number;
  /** Records the synchronous set where a successor will read it (etcd), before the leader relies on it. */
  publishSync(members: string[]): Promise<void>;
  /** Throws NO_LEADER once this server may no longer act as leader. */
  checkLeadership(): void;
  /** This server's datacenter: followers must prove to be its servers. */
  datacenter: string;
  /** Proves peers (certificates, server key); never an ACL token. */
  transport: Transport;
  /** Whether a name is a server of this datacenter (known to the coordinator, or configured). */
  isKnownServer(name: string): boolean;
  logger: Logger;
}

/** What the operator view shows of each follower. */
export interface FollowerStatus {
  Name: string;
  Address: string;
  /** Last batch the follower confirmed durable. */
  AckedSeq: number;
  LagBatches: number;
  InSyncSet: boolean;
  Streaming: boolean;
  LastContactMs: number;
}

interface Waiter {
  seq: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The leader's end of the server stream, and the store's batch replicator: every group
 * the store writes is sent to every streaming follower, and acknowledged to clients only
 * once the synchronous set holds it durably. A synchronous follower that stops
 * confirming is dropped from the set (published first); a caught-up one joins it.
 */
export class ServerLeader implements BatchReplicator {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  /** The leader's answer to each proven upgrade (the 101's proof headers). */
  private readonly answers = new WeakMap<IncomingMessage, Record<string, string>>();
  private readonly sessions = new Set<FollowerSession>();
  /** Batches of this history, oldest first; `base` is the position before the first. */
  private tail: ServerBatch[] = [];
  private readonly base: ServerPosition;
  private sync: string[] = [];
  private waiters: Waiter[] = [];
  /** Changes of the synchronous set, one at a time. */
  private syncChange: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly syncTimer: NodeJS.Timeout;

  constructor(
    readonly store: LevelStore,
    readonly options: LeaderOptions,
  ) {
    this.base = store.serverPosition();
    // Lagging synchronous followers are noticed even when no write waits on them.
    this.syncTimer = setInterval(() => this.review(), Math.max(50, Math.floor(options.syncTimeoutMs / 2)));
    this.syncTimer.unref();
    this.wss.on('headers', (headers, req) => {
      for (const [k, v] of Object.entries(this.answers.get(req) ?? {})) headers.push(`${k}: ${v}`);
    });
  }

  term(): number {
    return this.options.term;
  }

  checkLeadership(): void {
    if (this.closed) throw new WatchwordError('NO_LEADER', 'this server is no longer the leader');
    this.options.checkLeadership();
  }

  /** The published synchronous set. */
  syncSet(): string[] {
    return [...this.sync];
  }

  replicate(batch: ServerBatch): Promise<void> {
    this.tail.push(batch);
    if (this.tail.length > this.options.tailBatches * 1.25) {
      const dropped = this.tail.splice(0, this.tail.length - this.options.tailBatches);
      const last = dropped[dropped.length - 1] as ServerBatch;
      this.trimmedTo = { seq: last.seq, term: last.term };
    }
    for (const s of this.sessions) s.offer(batch);
    if (this.sync.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ seq: batch.seq, resolve, reject });
      this.settle();
    });
  }

  /** Position before the oldest batch still in the tail. */
  private trimmedTo: ServerPosition | undefined;

  localWriteFailed(): void {
    // Followers may hold a batch this server does not: they start over from a snapshot.
    this.tail = [];
    this.trimmedTo = { seq: Number.MAX_SAFE_INTEGER, term: 0 };
    for (const s of this.sessions) s.close(4000, 'the leader failed to write a batch; start over');
  }

  /** Batches after `pos`, when this history holds `pos` and everything after it; undefined: a snapshot is needed. */
  batchesAfter(pos: ServerPosition): ServerBatch[] | undefined {
    if (pos.seq === 0) return undefined;
    const start = this.trimmedTo ?? this.base;
    if (pos.seq === start.seq && pos.term === start.term && start.seq !== Number.MAX_SAFE_INTEGER) return [...this.tail];
    const i = this.tail.findIndex((b) => b.seq === pos.seq);
    if (i < 0 || (this.tail[i] as ServerBatch).term !== pos.term) return undefined;
    return this.tail.slice(i + 1);
  }

  /** The highest batch written (not necessarily durable yet). */
  lastSeq(): number {
    return this.tail[this.tail.length - 1]?.seq ?? this.store.serverPosition().seq;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, refuse: (status: number, message: string) => void): void {
    const url = new URL(req.url ?? '/', 'http://leader');
    const version = url.searchParams.get('version');
    if (version !== String(SERVER_PROTOCOL_VERSION)) return refuse(426, `unsupported server protocol version ${version ?? '(none)'}; this leader speaks ${SERVER_PROTOCOL_VERSION}`);
    const proven = this.prove(req);
    if (!proven.ok) {
      this.options.logger.warn({ from: req.socket.remoteAddress }, `server stream: refused a peer: ${proven.reason}`);
      return refuse(proven.status, proven.reason);
    }
    if (this.closed) return refuse(503, 'this server is no longer the leader');
    this.answers.set(req, proven.answer);
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const session = new FollowerSession(this, ws, proven.name);
      this.sessions.add(session);
    });
  }

  /**
   * Whether the peer is a server of this datacenter (SPEC §16): its certificate names
   * server.<dc>.<domain> (with TLS), and it holds the server key (when one is set); never an
   * ACL token. The name it streams under is the one it proved, must be a known server of
   * the datacenter, and must not already have a live session: a second one is refused,
   * not swapped in, so nobody can take a server's place.
   */
  private prove(req: IncomingMessage): { ok: true; name: string; answer: Record<string, string> } | { ok: false; status: number; reason: string } {
    const { transport, datacenter, name: self } = this.options;
    const byCertificate = transport.proveIncoming(req, datacenter);
    if (byCertificate && !byCertificate.ok) return { ok: false, status: 403, reason: `not a server of ${datacenter}: ${byCertificate.reason}` };
    const key = transport.serverKeyProof;
    let name = typeof req.headers[PROOF_HEADERS.name] === 'string' ? (req.headers[PROOF_HEADERS.name] as string) : '';
    let answer: Record<string, string> = { [PROOF_HEADERS.name]: self };
    if (key) {
      const byKey = key.verifyRequest(req.headers, { name: self, address: this.options.address() });
      if (!byKey.ok) return { ok: false, status: 403, reason: `not a server of ${datacenter}: ${byKey.reason}` };
      name = byKey.name;
      answer = key.response(byKey.nonce, self);
    } else if (!byCertificate) {
      return { ok: false, status: 403, reason: `not a server of ${datacenter}: this datacenter's servers prove themselves with TLS certificates or a server key, and neither is configured here` };
    }
    if (!name || name.length > 128) return { ok: false, status: 400, reason: 'the server did not name itself' };
    if (name === self) return { ok: false, status: 409, reason: `${name} is this server's own name` };
    if (!this.options.isKnownServer(name)) return { ok: false, status: 403, reason: `${name} is not a known server of ${datacenter}` };
    if ([...this.sessions].some((s) => s.name === name)) return { ok: false, status: 409, reason: `a session for ${name} is already live; a second one is refused` };
    return { ok: true, name, answer };
  }

  /** A session ended. */
  forget(session: FollowerSession): void {
    this.sessions.delete(session);
    if (this.sync.includes(session.name) && ![...this.sessions].some((s) => s.name === session.name)) {
      this.changeSync(this.sync.filter((n) => n !== session.name), `follower ${session.name} disconnected`);
    }
  }

  acked(): void {
    this.settle();
    this.review();
  }

  /** Resolves every waiter the synchronous set has confirmed. */
  private settle(): void {
    if (this.waiters.length === 0) return;
    let confirmed = Number.MAX_SAFE_INTEGER;
    for (const name of this.sync) confirmed = Math.min(confirmed, this.ackedBy(name));
    if (this.sync.length === 0) confirmed = Number.MAX_SAFE_INTEGER;
    let n = 0;
    while (n < this.waiters.length && (this.waiters[n] as Waiter).seq <= confirmed) n++;
    if (n === 0) return;
    const done = this.waiters.splice(0, n);
    for (const w of done) w.resolve();
  }

  private ackedBy(name: string): number {
    let best = -1;
    for (const s of this.sessions) if (s.name === name) best = Math.max(best, s.ackedSeq);
    return best;
  }

  /**
   * Drops synchronous followers that keep a write waiting past the timeout, and takes
   * in a caught-up follower while the set is short.
   */
  private review(): void {
    if (this.closed) return;
    const now = Date.now();
    const oldest = this.waiters[0];
    if (oldest) {
      const slow = this.sync.filter((name) => {
        const s = this.sessionOf(name);
        return !s || (s.ackedSeq < oldest.seq && now - s.lastAckAt > this.options.syncTimeoutMs);
      });
      if (slow.length > 0) this.changeSync(this.sync.filter((n) => !slow.includes(n)), `follower ${slow.join(', ')} stopped confirming writes within ${this.options.syncTimeoutMs} ms`);
    }
    if (this.sync.length < this.options.syncFollowers) {
      const durable = this.store.serverPosition().seq;
      const candidate = [...this.sessions].find((s) => s.streaming && !this.sync.includes(s.name) && s.ackedSeq >= durable);
      if (candidate) this.changeSync([...this.sync, candidate.name], `follower ${candidate.name} caught up`);
    }
  }

  private sessionOf(name: string): FollowerSession | undefined {
    let best: FollowerSession | undefined;
    for (const s of this.sessions) if (s.name === name && (!best || s.ackedSeq > best.ackedSeq)) best = s;
    return best;
  }

  private pendingSync: string | undefined;

  /** Publishes a new synchronous set, then relies on it. One change at a time. */
  private changeSync(next: string[], why: string): void {
    const key = next.join(',');
    if (this.pendingSync === key) return;
    this.pendingSync = key;
    this.syncChange = this.syncChange.then(async () => {
      if (this.closed) return;
      const before = this.sync;
      // Writes wait for a new member from before it is published (once published it may take
      // over, so it must already hold every write acknowledged from then on); a dropped member
      // is waited for until its removal is published.
      this.sync = [...new Set([...before, ...next])];
      try {
        // ...and holds every write acknowledged before it started to be waited for.
        const added = next.filter((n) => !before.includes(n));
        const upTo = this.lastSeq();
        const deadline = Date.now() + this.options.syncTimeoutMs;
        while (added.some((n) => this.ackedBy(n) < upTo)) {
          if (this.closed || Date.now() > deadline) throw new Error(`follower ${added.join(', ')} did not confirm batch ${upTo} in time`);
          await new Promise((r) => setTimeout(r, 5));
        }
        await this.options.publishSync(next);
        this.sync = next;
        this.options.logger.info({ sync: next, before }, `synchronous set changed: ${why}`);
        if (next.length === 0) this.options.logger.warn('running without a synchronous copy: writes are durable on the leader only');
      } catch (err) {
        // Writes keep waiting for every member of the set as published, and for any addition until it is.
        this.options.logger.error({ err }, 'cannot change the synchronous set');
      } finally {
        if (this.pendingSync === key) this.pendingSync = undefined;
      }
      this.settle();
    });
  }

  followers(): FollowerStatus[] {
    const last = this.lastSeq();
    return [...this.sessions]
      .filter((s) => s.greeted)
      .map((s) => ({
        Name: s.name,
        Address: s.address,
        AckedSeq: s.ackedSeq,
        LagBatches: Math.max(0, last - s.ackedSeq),
        InSyncSet: this.sync.includes(s.name),
        Streaming: s.streaming,
        LastContactMs: s.heartbeat.sinceHeardMs() ?? 0,
      }));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.syncTimer);
    const err = new WatchwordError('NO_LEADER', 'leadership ended before the synchronous followers confirmed the write; it may or may not have been kept');
    for (const w of this.waiters.splice(0)) w.reject(err);
    for (const s of this.sessions) s.close(4002, 'leadership ended');
    this.sessions.clear();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}

/** One follower's stream, at the leader. */
class FollowerSession {
  /** The name the follower proved on the upgrade (its hello must say the same). */
  readonly name: string;
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
    private readonly leader: ServerLeader,
    private readonly ws: WebSocket,
    name: string,
  ) {
    this.name = name;
    ws.on('message', (data) => this.receive(data));
    ws.on('close', () => this.end());
    ws.on('error', () => undefined);
    const { heartbeatMs, deadPeerMs } = leader.options;
    this.heartbeat = new Heartbeat({
      everyMs: heartbeatMs,
      deadAfterMs: deadPeerMs,
      beat: () => this.send({ t: 'ping', time: Date.now(), seq: leader.lastSeq() }),
      silent: () => this.close(4008, `no frame from the follower for ${deadPeerMs} ms`),
    });
    this.heartbeat.start();
  }

  private send(frame: LeaderFrame): void {
    if (this.closed || this.ws.readyState !== this.ws.OPEN) return;
    this.ws.send(encodeFrame(frame));
  }

  offer(batch: ServerBatch): void {
    if (this.streaming) this.send({ t: 'batch', ...batch });
    else if (this.greeted) this.held.push(batch);
  }

  private receive(data: unknown): void {
    this.heartbeat.heard();
    let frame: FollowerFrame;
    try {
      frame = decodeFrame(followerFrame, data);
    } catch (err) {
      this.leader.options.logger.warn({ err: (err as FrameError).message }, 'server stream: malformed frame from a follower; closing');
      return this.close(4002, (err as Error).message);
    }
    if (frame.t === 'ping') return;
    if (frame.t === 'ack') {
      if (frame.seq > this.ackedSeq) {
        this.ackedSeq = frame.seq;
        this.lastAckAt = Date.now();
      }
      this.leader.acked();
      return;
    }
    if (this.greeted) return this.close(4002, 'hello sent twice');
    if (frame.v !== SERVER_PROTOCOL_VERSION) return this.fail('VERSION', `unsupported server protocol version ${frame.v}; this leader speaks ${SERVER_PROTOCOL_VERSION}`);
    if (frame.name !== this.name) return this.fail('NAME', `the hello names ${frame.name}, but this connection proved ${this.name}`);
    this.greeted = true;
    this.address = frame.address;
    this.ackedSeq = frame.seq;
    void this.catchUp({ seq: frame.seq, term: frame.term });
  }

  /** Sends what the follower lacks: the batches after its position, or a snapshot and the batches after it. */
  private async catchUp(from: ServerPosition): Promise<void> {
    const { leader } = this;
    const after = leader.batchesAfter(from);
    try {
      if (after) {
        this.send({ t: 'welcome', v: SERVER_PROTOCOL_VERSION, term: leader.term(), leader: leader.options.name, mode: 'tail' });
        for (const b of after) this.send({ t: 'batch', ...b });
        this.goLive(after[after.length - 1]?.seq ?? from.seq);
        return;
      }
      this.send({ t: 'welcome', v: SERVER_PROTOCOL_VERSION, term: leader.term(), leader: leader.options.name, mode: 'snapshot' });
      // Batches written from here on are held; those the snapshot already shows are skipped.
      this.held = [];
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
      this.send({ t: 'batch', ...b });
      last = b.seq;
    }
    this.streaming = true;
  }

  /** Waits while the socket holds a lot unsent (a snapshot of a big store). */
  private async drain(): Promise<void> {
    while (!this.closed && this.ws.bufferedAmount > 16 * 1024 * 1024) await new Promise((r) => setTimeout(r, 10));
  }

  private fail(code: string, message: string): void {
    this.send({ t: 'error', code, message });
    this.close(4002, message);
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.ws.close(code, reason.slice(0, 120));
    this.end();
  }

  private end(): void {
    if (this.closed) return;
    this.closed = true;
    this.streaming = false;
    this.heartbeat.stop();
    this.leader.forget(this);
  }
}
