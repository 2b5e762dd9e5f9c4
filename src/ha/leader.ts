import { type LeaderHost, LeaderSession, type ServerChannel, wsServerChannel } from './leader-session.js';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import { WatchwordError } from '../domain/errors.js';
import { PROOF_HEADERS } from '../transport/server-key.js';
import type { Transport } from '../transport/transport.js';
import type { BatchReplicator, ServerBatch, ServerPosition, ServerStore } from '../store/store.js';
import { SERVER_PROTOCOL_VERSION } from './server-protocol.js';
import { PROTOCOL_HEADER } from '../replication/protocol.js';
import type { ReleaseBook, ServerRelease } from '../replication/releases.js';
import { SERVER_PROTOCOL, VERSION, negotiate, peerRange, rangeText } from '../version.js';
import { additionsCaughtUp, confirmedUpTo, nextMember, slowMembers, waitingFor } from './sync-set.js';

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
  /** On a secondary datacenter's leader: how long the primary has been silent, ms (told to followers with each ping). */
  primarySilentForMs?: () => number | undefined;
  logger: Logger;
  /** The cluster's versions as this leader knows them, told down to followers. */
  releases?: ReleaseBook;
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
  /** Its release and the versions it speaks. */
  Release: ServerRelease;
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
export class ServerLeader implements BatchReplicator, LeaderHost {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  /** The leader's answer to each proven upgrade (the 101's proof headers). */
  private readonly answers = new WeakMap<IncomingMessage, Record<string, string>>();
  private readonly sessions = new Set<LeaderSession>();
  /** Batches of this batch log, oldest first; `base` is the position before the first. */
  private tail: ServerBatch[] = [];
  private readonly base: ServerPosition;
  private sync: string[] = [];
  private waiters: Waiter[] = [];
  /** Changes of the synchronous set, one at a time. */
  private syncChange: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly syncTimer: NodeJS.Timeout;
  /** The last batch acknowledged; everything this server held when it began leading counts as committed. */
  private commitSeq: number;
  /** The commit point followers were last told, and whether telling them again is scheduled. */
  private toldCommit: number;
  private telling = false;

  constructor(
    readonly store: ServerStore,
    readonly options: LeaderOptions,
  ) {
    this.base = store.serverPosition();
    this.commitSeq = this.base.seq;
    this.toldCommit = this.base.seq;
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

  committedSeq(): number {
    return this.commitSeq;
  }

  /**
   * Batch `seq` is acknowledged: followers may show it. They learn it with the next batch,
   * or, when none follows at once, in a ping sent once the current burst of commits is done.
   */
  committed(seq: number): void {
    if (seq <= this.commitSeq) return;
    this.commitSeq = seq;
    if (this.telling) return;
    this.telling = true;
    setImmediate(() => {
      this.telling = false;
      if (this.closed || this.commitSeq <= this.toldCommit) return;
      this.toldCommit = this.commitSeq;
      for (const s of this.sessions) s.tellCommitted(this.commitSeq);
    });
  }

  /** The primary was just heard (a secondary's leader): each follower is told at once. */
  relayPrimaryContact(): void {
    if (!this.closed) for (const s of this.sessions) s.relayPrimaryContact();
  }

  localWriteFailed(): void {
    // Followers may hold a batch this server does not: they start over from a snapshot.
    this.restartFollowers('the leader failed to write a batch; start over');
  }

  batchLogReplaced(): void {
    this.restartFollowers("the leader's store was replaced; start over from its snapshot");
  }

  /** No follower resumes from this batch log's tail: each starts over from a snapshot. */
  private restartFollowers(reason: string): void {
    this.tail = [];
    this.trimmedTo = { seq: Number.MAX_SAFE_INTEGER, term: 0 };
    for (const s of this.sessions) s.close(4000, reason);
  }

  /** Batches after `pos`, when this batch log holds `pos` and everything after it; undefined: a snapshot is needed. */
  batchesAfter(pos: ServerPosition): ServerBatch[] | undefined {
    if (pos.seq === 0) return undefined;
    const start = this.trimmedTo ?? this.base;
    if (pos.seq === start.seq && pos.term === start.term && start.seq !== Number.MAX_SAFE_INTEGER) return [...this.tail];
    const i = this.tail.findIndex((b) => b.seq === pos.seq);
    if (i < 0 || (this.tail[i] as ServerBatch).term !== pos.term) return undefined;
    return this.tail.slice(i + 1);
  }

  unwritten(): ServerBatch[] {
    const durable = this.store.serverPosition().seq;
    let i = this.tail.length;
    while (i > 0 && (this.tail[i - 1] as ServerBatch).seq > durable) i--;
    return this.tail.slice(i);
  }

  /** The highest batch written (not necessarily durable yet). */
  lastSeq(): number {
    return this.tail[this.tail.length - 1]?.seq ?? this.store.serverPosition().seq;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, refuse: (status: number, message: string) => void): void {
    const url = new URL(req.url ?? '/', 'http://leader');
    // The follower's range (0.1.0 names one version; later releases add `max`): the highest both speak.
    const theirs = peerRange(url.searchParams.get('version'), url.searchParams.get('max'));
    const version = theirs === undefined ? undefined : negotiate(SERVER_PROTOCOL, theirs);
    if (version === undefined)
      return refuse(
        426,
        `unsupported server protocol: the follower speaks ${theirs ? rangeText(theirs) : '(none)'}, this leader (${VERSION}) speaks ` +
          rangeText(SERVER_PROTOCOL),
      );
    const proven = this.prove(req);
    if (!proven.ok) {
      this.options.logger.warn({ from: req.socket.remoteAddress }, `server stream: refused a peer: ${proven.reason}`);
      return refuse(proven.status, proven.reason);
    }
    if (this.closed) return refuse(503, 'this server is no longer the leader');
    this.answers.set(req, { ...proven.answer, [PROTOCOL_HEADER]: String(version) });
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      let session: LeaderSession | undefined;
      session = this.open(
        wsServerChannel(ws, () => session),
        proven.name,
        version,
      );
    });
  }

  /** A session for a follower that proved `name`, speaking `version`, on a channel (a WebSocket, or a test's). */
  open(channel: ServerChannel, name: string, version = SERVER_PROTOCOL_VERSION): LeaderSession {
    const session = new LeaderSession(this, channel, name, version);
    this.sessions.add(session);
    return session;
  }

  /**
   * Whether the peer is a server of this datacenter (docs/tls.md, "TLS"): its certificate names
   * server.<dc>.<domain> (with TLS), and it holds the server key (when one is set); never an
   * ACL token. The name it streams under is the one it proved, must be a known server of
   * the datacenter, and must not already have a live session: a second one is refused,
   * not swapped in, so nobody can take a server's place.
   */
  private prove(
    req: IncomingMessage,
  ): { ok: true; name: string; answer: Record<string, string> } | { ok: false; status: number; reason: string } {
    const { transport, datacenter, name: self } = this.options;
    const byCertificate = transport.proveIncoming(req, datacenter);
    if (byCertificate && !byCertificate.ok)
      return { ok: false, status: 403, reason: `not a server of ${datacenter}: ${byCertificate.reason}` };
    const key = transport.serverKeyProof;
    let name = typeof req.headers[PROOF_HEADERS.name] === 'string' ? (req.headers[PROOF_HEADERS.name] as string) : '';
    let answer: Record<string, string> = { [PROOF_HEADERS.name]: self };
    if (key) {
      const byKey = key.verifyRequest(req.headers, { name: self, address: this.options.address() });
      if (!byKey.ok) return { ok: false, status: 403, reason: `not a server of ${datacenter}: ${byKey.reason}` };
      name = byKey.name;
      answer = key.response(byKey.nonce, self);
    } else if (!byCertificate) {
      return {
        ok: false,
        status: 403,
        reason:
          `not a server of ${datacenter}: this datacenter's servers prove themselves with TLS certificates or a server key, and ` +
          `neither is configured here`,
      };
    }
    if (!name || name.length > 128) return { ok: false, status: 400, reason: 'the server did not name itself' };
    if (name === self) return { ok: false, status: 409, reason: `${name} is this server's own name` };
    if (!this.options.isKnownServer(name)) return { ok: false, status: 403, reason: `${name} is not a known server of ${datacenter}` };
    if ([...this.sessions].some((s) => s.name === name))
      return { ok: false, status: 409, reason: `a session for ${name} is already live; a second one is refused` };
    return { ok: true, name, answer };
  }

  /** A session ended. */
  forget(session: LeaderSession): void {
    this.sessions.delete(session);
    if (this.sync.includes(session.name) && ![...this.sessions].some((s) => s.name === session.name)) {
      this.changeSync(
        this.sync.filter((n) => n !== session.name),
        `follower ${session.name} disconnected`,
      );
    }
  }

  acked(): void {
    this.settle();
    for (const w of [...this.catchUps]) w.check();
    this.review();
  }

  /** Resolves every waiter the servers waited for have confirmed (sync-set.ts, invariant 1). */
  private settle(): void {
    if (this.waiters.length === 0) return;
    const confirmed = confirmedUpTo(this.sync, (name) => this.ackedBy(name));
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
    const { syncTimeoutMs, syncFollowers } = this.options;
    const slow = slowMembers(this.sync, (name) => this.sessionOf(name), this.waiters[0]?.seq, Date.now(), syncTimeoutMs);
    if (slow.length > 0)
      this.changeSync(
        this.sync.filter((n) => !slow.includes(n)),
        `follower ${slow.join(', ')} stopped confirming writes within ${syncTimeoutMs} ms`,
      );
    const joining = nextMember(this.sync, this.sessions, this.store.serverPosition().seq, syncFollowers);
    if (joining) this.changeSync([...this.sync, joining], `follower ${joining} caught up`);
  }

  /** Changes of the set waiting for additions to confirm a batch, checked on every confirmation. */
  private readonly catchUps = new Set<{ check: () => void }>();

  /** Resolves once `ready()` holds (checked on every confirmation), or rejects after `timeoutMs`. */
  private until(ready: () => boolean, timeoutMs: number, why: string): Promise<void> {
    if (ready()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const entry = {
        check: () => {
          if (!ready() && !this.closed) return;
          clearTimeout(timer);
          this.catchUps.delete(entry);
          if (this.closed) reject(new Error('leadership ended'));
          else resolve();
        },
      };
      const timer = setTimeout(() => {
        this.catchUps.delete(entry);
        reject(new Error(why));
      }, timeoutMs);
      this.catchUps.add(entry);
    });
  }

  private sessionOf(name: string): LeaderSession | undefined {
    let best: LeaderSession | undefined;
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
      this.sync = waitingFor(before, next);
      try {
        // ...and holds every write acknowledged before it started to be waited for.
        const upTo = this.lastSeq();
        const added = next.filter((n) => !before.includes(n));
        await this.until(
          () => additionsCaughtUp(before, next, (n) => this.ackedBy(n), upTo),
          this.options.syncTimeoutMs,
          `follower ${added.join(', ')} did not confirm batch ${upTo} in time`,
        );
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
        Release: s.release,
      }));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.syncTimer);
    const err = new WatchwordError(
      'NO_LEADER',
      'leadership ended before the synchronous followers confirmed the write; it may or may not have been kept',
    );
    for (const w of this.waiters.splice(0)) w.reject(err);
    for (const c of [...this.catchUps]) c.check();
    for (const s of this.sessions) s.close(4002, 'leadership ended');
    this.sessions.clear();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}
