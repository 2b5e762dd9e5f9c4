import { USES_PER_REPORT } from '../store/last-use.js';
import type { ServerStore } from '../store/store.js';
import type { Logger } from 'pino';
import { WebSocket } from 'ws';
import { Heartbeat } from '../transport/heartbeat.js';
import { Backoff } from '../transport/backoff.js';
import { PROTOCOL_HEADER, decodeFrame, encodeFrame } from '../replication/protocol.js';
import { SERVER_PROTOCOL, rangeText } from '../version.js';
import { type ReleaseBook, selfRelease } from '../replication/releases.js';
import { FollowerStream } from './follower-stream.js';
import { type Transport, describeConnectError } from '../transport/transport.js';
import {
  type FollowerFrame,
  type LeaderFrame,
  SERVERS_PATH,
  SERVER_MAX_PAYLOAD,
  SERVER_PROTOCOL_VERSION,
  leaderFrame,
} from './server-protocol.js';

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
  /** The proven leader of a secondary datacenter reports the primary was last heard `ms` ago. */
  onPrimarySilence?: (ms: number) => void;
  /** The cluster's versions: the picture the leader tells is kept there. */
  releases?: ReleaseBook;
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
  /** Frames from the leader are left unread until the stream has written what it holds. */
  private readingPaused = false;
  private readonly backoff: Backoff;
  private retry: NodeJS.Timeout | undefined;
  private readonly heartbeat: Heartbeat;
  private readonly stream: FollowerStream;
  private lastError = '';
  /** When the leader first refused the stream since its last welcome. */
  private refusedSince: number | undefined;
  /** The peer proved to be the leader on this connection: only then is anything it sends applied, or anything sent to it. */
  private proven = false;
  /** The protocol version agreed with the leader at the upgrade. */
  private version = SERVER_PROTOCOL_VERSION;

  constructor(
    private readonly store: ServerStore,
    private readonly options: FollowerOptions,
  ) {
    this.backoff = new Backoff(options.backoffMinMs, options.backoffMaxMs);
    this.stream = new FollowerStream(
      store,
      { name: options.name, address: options.address, term: options.term, logger: options.logger },
      {
        send: (frame) => this.send(frame),
        drop: (reason) => this.drop(reason),
        welcomed: () => {
          this.refusedSince = undefined;
          this.backoff.reset();
          this.lastError = '';
          // Version 3: this server's release, for the leader's picture of the datacenter.
          if (this.version >= 3) this.send({ t: 'release', server: selfRelease(options.name) });
        },
        cluster: (picture) => options.releases?.heard(picture),
        // The leader's frames wait on TCP while this server writes what it has; it is alive meanwhile.
        pause: () => {
          this.readingPaused = true;
          this.ws?.pause();
        },
        resume: () => {
          this.readingPaused = false;
          this.heartbeat.heard();
          this.ws?.resume();
        },
        primarySilence: (ms) => {
          if (this.proven) options.onPrimarySilence?.(ms);
        },
      },
    );
    this.heartbeat = new Heartbeat({
      everyMs: options.heartbeatMs,
      deadAfterMs: options.deadPeerMs,
      beat: () => {
        // Not reading (frames wait while a snapshot is written): the leader is not silent.
        if (this.readingPaused) this.heartbeat.heard();
        this.send({ t: 'ping', time: Date.now() });
        this.reportUses();
      },
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
      LeaderSeq: Math.max(this.stream.leaderSeq, this.store.serverPosition().seq),
      AppliedSeq: this.store.serverPosition().seq,
      LastContactMs: this.heartbeat.sinceHeardMs() ?? -1,
      LastError: this.lastError,
      RefusedForMs: this.refusedSince === undefined ? 0 : Date.now() - this.refusedSince,
    };
  }

  /** Whether this server's store is a prefix of its leader's batch log (see FollowerStream). */
  holdsLeaderLog(): boolean {
    return this.proven && this.stream.holdsLeaderLog();
  }

  /** The connection to the leader now, once it has proven itself and been greeted, and the protocol agreed on it. */
  current(): { connection: number; version: number } | undefined {
    return this.proven && this.connected ? { connection: this.stream.connection, version: this.version } : undefined;
  }

  /** Whether the peer at leaderURL has proven, on the current connection, to be the leader. */
  isProven(): boolean {
    return this.proven;
  }

  private connect(): void {
    if (this.stopped) return;
    const { transport, datacenter, leaderURL, leader, name } = this.options;
    const leaderName = leader.name;
    // The range this release speaks: `version` its lowest (which a leader of 0.1.0 checks), `max` its highest.
    const url = transport.websocketURL(leaderURL, SERVERS_PATH, { version: String(SERVER_PROTOCOL.min), max: String(SERVER_PROTOCOL.max) });
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
      if (proved.name !== leaderName)
        return this.drop(`the server at ${leaderURL} is ${proved.name || 'unnamed'}, not the leader ${leaderName}`);
      // The version agreed (a leader of 0.1.0 says none: it speaks SERVER_PROTOCOL_VERSION).
      const agreed = res.headers[PROTOCOL_HEADER];
      this.version = typeof agreed === 'string' ? Number(agreed) : SERVER_PROTOCOL_VERSION;
      if (!(this.version >= SERVER_PROTOCOL.min && this.version <= SERVER_PROTOCOL.max))
        return this.drop(
          `the leader agreed server protocol ${this.version}, which this release does not speak (${rangeText(SERVER_PROTOCOL)})`,
        );
      this.proven = true;
    });
    ws.on('open', () => {
      if (!this.proven) return this.drop(`the server at ${leaderURL} did not prove to be the leader`);
      this.connected = true;
      this.heartbeat.start();
      this.send(this.stream.hello(this.version));
    });
    ws.on('unexpected-response', (_req, res) => {
      this.refusedSince ??= Date.now();
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => this.drop(`the leader refused the stream (${res.statusCode}): ${body.trim()}`));
    });
    ws.on('message', (data) => this.receive(data));
    ws.on('close', (code, reason) =>
      this.drop(`connection to the leader closed (${code}${reason.length ? `: ${reason.toString()}` : ''})`),
    );
    ws.on('error', (err) => this.drop(`cannot reach the leader at ${this.options.leaderURL}: ${describeConnectError(err)}`));
  }

  /** The last uses this server saw since its last report, to its leader (docs/http-api.md, "Last use"); kept for the next when it cannot be sent. */
  private reportUses(): void {
    const uses = this.store.lastUse.takeUnflushed(USES_PER_REPORT);
    if (uses.length === 0) return;
    if (this.proven && this.ws?.readyState === WebSocket.OPEN) this.send({ t: 'uses', uses });
    else this.store.lastUse.giveBack(uses);
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
    this.stream.receive(frame);
  }

  private drop(reason: string): void {
    if (this.stopped) return;
    const ws = this.ws;
    if (!ws) return;
    this.ws = undefined;
    this.connected = false;
    this.proven = false;
    this.lastError = reason;
    this.stream.disconnected();
    this.readingPaused = false;
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
    await this.stream.stop();
  }
}
