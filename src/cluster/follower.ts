import type { Logger } from 'pino';
import { WebSocket } from 'ws';
import { Heartbeat } from '../replication/heartbeat.js';
import { Backoff } from '../replication/backoff.js';
import type { LevelStore } from '../store/level-store.js';
import type { ServerBatch } from '../store/store.js';
import { decodeFrame, encodeFrame } from '../replication/protocol.js';
import { type Transport, describeConnectError } from '../transport/transport.js';
import { type FollowerFrame, type LeaderFrame, SERVERS_PATH, SERVER_MAX_PAYLOAD, SERVER_PROTOCOL_VERSION, leaderFrame } from './server-protocol.js';

export interface FollowerOptions {
  name: string;
  datacenter: string;
  /** This server's HTTP address, told to the leader. */
  address: () => string;
  /** HTTP base URL of the leader. */
  leaderURL: string;
  /** The leader as the coordinator names it: the peer at leaderURL must prove to be it. */
  leader: { name: string; address: string };
  /** The leadership term the coordinator names; batches of an older term are refused. */
  term: number;
  /** Proves this server to the leader, and the leader to it. */
  transport: Transport;
  heartbeatMs: number;
  deadPeerMs: number;
  backoffMinMs: number;
  backoffMaxMs: number;
  logger: Logger;
}

/** What the operator view shows of a follower's stream. */
export interface FollowerStreamStatus {
  Leader: string;
  Connected: boolean;
  /** Last batch the leader is known to have written. */
  LeaderSeq: number;
  AppliedSeq: number;
  LastContactMs: number;
  LastError: string;
  /** How long the leader has refused this server's stream without a welcome in between, ms (0 while it does not). */
  RefusedForMs: number;
}

/**
 * A follower's end of the server stream: connects to the leader, takes a snapshot when
 * told, applies batches in order (several queued ones in one atomic write), and confirms
 * each once durable. A batch that does not follow the last applied one, or comes from
 * an older term, ends the connection; the next hello lets the leader decide again.
 */
export class ServerFollower {
  private ws: WebSocket | undefined;
  private stopped = false;
  private connected = false;
  private readonly backoff: Backoff;
  private retry: NodeJS.Timeout | undefined;
  private readonly heartbeat: Heartbeat;
  private leaderSeq = 0;
  private lastError = '';
  private queue: ServerBatch[] = [];
  private applying = false;
  private snapshot: Array<[string, Uint8Array]> = [];
  /** Set by the welcome: the connection's term. */
  private term = 0;
  /** When the leader first refused the stream since its last welcome. */
  private refusedSince: number | undefined;
  /** The peer proved to be the leader on this connection: only then is anything it sends applied, or anything sent to it. */
  private proven = false;

  constructor(
    private readonly store: LevelStore,
    private readonly options: FollowerOptions,
  ) {
    this.backoff = new Backoff(options.backoffMinMs, options.backoffMaxMs);
    this.heartbeat = new Heartbeat({
      everyMs: options.heartbeatMs,
      deadAfterMs: options.deadPeerMs,
      beat: () => this.send({ t: 'ping', time: Date.now() }),
      silent: () => this.drop(`no frame from the leader for ${options.deadPeerMs} ms`),
    });
  }

  start(): void {
    this.connect();
  }

  status(): FollowerStreamStatus {
    return {
      Leader: this.options.leaderURL,
      Connected: this.connected,
      LeaderSeq: Math.max(this.leaderSeq, this.store.serverPosition().seq),
      AppliedSeq: this.store.serverPosition().seq,
      LastContactMs: this.heartbeat.sinceHeardMs() ?? -1,
      LastError: this.lastError,
      RefusedForMs: this.refusedSince === undefined ? 0 : Date.now() - this.refusedSince,
    };
  }

  /** Whether the peer at leaderURL has proven, on the current connection, to be the leader. */
  isProven(): boolean {
    return this.proven;
  }

  private connect(): void {
    if (this.stopped) return;
    const { transport, datacenter, leaderURL, leader, name } = this.options;
    const leaderName = leader.name;
    const url = transport.websocketURL(leaderURL, SERVERS_PATH, { version: String(SERVER_PROTOCOL_VERSION) });
    // With TLS the leader's certificate is checked in the handshake; with a server key its proof in the 101.
    const challenge = transport.serverKeyProof?.request(name, leader);
    const ws = new WebSocket(url, {
      ...transport.websocketOptions({ datacenter }),
      headers: challenge?.headers ?? { 'x-watchword-server-name': name },
      maxPayload: SERVER_MAX_PAYLOAD,
      perMessageDeflate: false,
      handshakeTimeout: 5000,
    });
    this.ws = ws;
    ws.on('upgrade', (res) => {
      const key = transport.serverKeyProof;
      const answer = key && challenge ? key.verifyResponse(challenge.nonce, res.headers) : undefined;
      const proved = answer ? answer : { ok: true as const, name: String(res.headers['x-watchword-server-name'] ?? '') };
      if (!proved.ok) return this.drop(`refused the leader at ${leaderURL}: ${proved.reason}`);
      if (proved.name !== leaderName) return this.drop(`the server at ${leaderURL} is ${proved.name || 'unnamed'}, not the leader ${leaderName}`);
      this.proven = true;
    });
    ws.on('open', () => {
      if (!this.proven) return this.drop(`the server at ${leaderURL} did not prove to be the leader`);
      this.connected = true;
      this.heartbeat.start();
      const pos = this.store.serverPosition();
      this.send({ t: 'hello', v: SERVER_PROTOCOL_VERSION, name: this.options.name, address: this.options.address(), seq: pos.seq, term: pos.term });
    });
    ws.on('unexpected-response', (_req, res) => {
      this.refusedSince ??= Date.now();
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => this.drop(`the leader refused the stream (${res.statusCode}): ${body.trim()}`));
    });
    ws.on('message', (data) => this.receive(data));
    ws.on('close', (code, reason) => this.drop(`connection to the leader closed (${code}${reason.length ? `: ${reason.toString()}` : ''})`));
    ws.on('error', (err) => this.drop(`cannot reach the leader at ${this.options.leaderURL}: ${describeConnectError(err)}`));
  }

  private send(frame: FollowerFrame): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(encodeFrame(frame));
  }

  private receive(data: unknown): void {
    if (!this.proven) return;
    this.heartbeat.heard();
    let frame: LeaderFrame;
    try {
      frame = decodeFrame(leaderFrame, data);
    } catch (err) {
      return this.drop((err as Error).message);
    }
    switch (frame.t) {
      case 'ping':
        this.leaderSeq = Math.max(this.leaderSeq, frame.seq);
        return;
      case 'error':
        return this.drop(`the leader refused: ${frame.message}`);
      case 'welcome':
        if (frame.term < this.options.term) return this.drop(`the leader's term ${frame.term} is older than the current term ${this.options.term}`);
        this.term = frame.term;
        this.refusedSince = undefined;
        this.snapshot = [];
        this.backoff.reset();
        this.lastError = '';
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
        if (frame.term < this.term || frame.term < this.options.term) return this.drop(`refused a batch of the older term ${frame.term}`);
        this.leaderSeq = Math.max(this.leaderSeq, frame.seq);
        this.enqueue({ kind: 'batch', batch: frame });
        return;
    }
  }

  private pendingSnapshot: { pairs: Array<[string, Uint8Array]>; seq: number; term: number } | undefined;

  private enqueue(item: { kind: 'snapshot'; pairs: Array<[string, Uint8Array]>; seq: number; term: number } | { kind: 'batch'; batch: ServerBatch }): void {
    if (item.kind === 'snapshot') {
      this.pendingSnapshot = item;
      this.queue = [];
    } else {
      this.queue.push(item.batch);
    }
    void this.apply();
  }

  /** Applies what arrived, in order: a snapshot first, then queued batches in one write. */
  private async apply(): Promise<void> {
    if (this.applying) return;
    this.applying = true;
    const ws = this.ws;
    try {
      while (!this.stopped && ws === this.ws && (this.pendingSnapshot || this.queue.length > 0)) {
        if (this.pendingSnapshot) {
          const snap = this.pendingSnapshot;
          this.pendingSnapshot = undefined;
          await this.store.installServerSnapshot(snap.pairs, { seq: snap.seq, term: snap.term });
          this.options.logger.info({ seq: snap.seq, term: snap.term }, 'server stream: installed a snapshot from the leader');
          this.send({ t: 'ack', seq: snap.seq });
          continue;
        }
        const batches = this.queue;
        this.queue = [];
        let expected = this.store.serverPosition().seq;
        for (const b of batches) {
          if (b.prev !== expected) {
            this.drop(`batch ${b.seq} follows ${b.prev}, but ${expected} is the last applied here; starting over`);
            return;
          }
          expected = b.seq;
        }
        await this.store.applyServerBatches(batches);
        this.send({ t: 'ack', seq: expected });
      }
    } catch (err) {
      this.options.logger.error({ err }, 'server stream: cannot apply what the leader sent');
      this.drop(`cannot apply what the leader sent: ${(err as Error).message}`);
    } finally {
      this.applying = false;
    }
  }

  private drop(reason: string): void {
    if (this.stopped) return;
    const ws = this.ws;
    if (!ws) return;
    this.ws = undefined;
    this.connected = false;
    this.proven = false;
    this.lastError = reason;
    this.queue = [];
    this.pendingSnapshot = undefined;
    this.heartbeat.stop();
    ws.removeAllListeners();
    ws.on('error', () => undefined);
    ws.terminate();
    this.options.logger.warn({ leader: this.options.leaderURL }, `server stream: ${reason}`);
    const delay = this.backoff.next();
    this.retry = setTimeout(() => this.connect(), delay);
    this.retry.unref();
  }

  /** Stops streaming; resolves once nothing is being applied. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    this.heartbeat.stop();
    const ws = this.ws;
    this.ws = undefined;
    if (ws) {
      ws.removeAllListeners();
      ws.on('error', () => undefined);
      ws.terminate();
    }
    while (this.applying) await new Promise((r) => setTimeout(r, 5));
  }
}
