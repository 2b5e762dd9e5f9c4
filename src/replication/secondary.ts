import { USES_PER_REPORT } from '../store/last-use.js';
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { WebSocket } from 'ws';
import type { Metrics } from '../observability/metrics.js';
import type { Store } from '../store/store.js';
import type { ReplicationStatusResponse } from '../api/schemas.js';
import { Backoff } from '../transport/backoff.js';
import { FORWARD_KEY_HEADER } from '../transport/forward-keys.js';
import { Heartbeat } from '../transport/heartbeat.js';
import { FENCED_ON_STOP, REPLICATION_PROTOCOL, rangeText } from '../version.js';
import type { ClusterPicture, ReleaseBook } from './releases.js';
import {
  type DatacenterInfo,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  type PrimaryFrame,
  REPLICATION_PATH,
  type SecondaryFrame,
  decodeFrame,
  encodeFrame,
  primaryFrame,
} from './protocol.js';
import { PrimaryContact } from './primary-contact.js';
import { type Arrival, SecondaryStream } from './secondary-stream.js';
import { type Transport, describeConnectError, isPeerAddress } from '../transport/transport.js';
import type { AuditType } from '../domain/audit-types.js';

export interface SecondaryOptions {
  /** Reaches the primary; with TLS, its certificate must name server.<primary dc>.<domain> before the token is sent. */
  transport: Transport;
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
  /** The server's clock of when the primary was last heard (kept across leadership changes). */
  contact?: PrimaryContact;
  /** A planned transfer: the primary hands its role to this datacenter (docs/datacenters.md). */
  onHandover?: (epoch: number, upTo: number) => void;
  /** Records an event in the audit log (connected to the primary, disconnected). */
  onEvent?: (type: AuditType, details: Record<string, unknown>) => void;
  /** The cluster's versions: this datacenter's servers reported, the primary's picture kept (version 5). */
  releases?: ReleaseBook;
}

const ZERO_TIME = '0001-01-01T00:00:00Z';
/** How often the same replication failure is logged again while it lasts. */
const FAILURE_LOG_EVERY_MS = 60_000;

/** Objects named in one `rolled-back` audit line; more go on further lines. */
const ROLLED_BACK_PER_LINE = 1000;

/** Uses waiting for the primary, at most: past it, new tokens' wait for their next use (a primary gone for long). */
const MAX_UNREPORTED = 1_000_000;

/**
 * The secondary's end of replication over a WebSocket: connects (to each configured
 * server of the primary datacenter in turn, or the leader one of them names), keeps the
 * heartbeat, reconnects with backoff, and feeds every decoded frame to a SecondaryStream,
 * which applies them (the protocol itself, socket-free).
 */
export class ReplicationSecondary {
  private ws: WebSocket | undefined;
  private readonly stream: SecondaryStream;
  private running = false;
  private stopped = false;
  private lastSuccess = ZERO_TIME;
  private lastError = ZERO_TIME;
  private lastErrorMessage = '';
  private reconnectTimer: NodeJS.Timeout | undefined;
  /** When the primary was last heard from: what replication_max_stale measures (the server's, shared across roles). */
  private readonly contact: PrimaryContact;
  /** The current connection's (the last one's, while disconnected). */
  private heartbeat: Heartbeat | undefined;
  /** Frames from the primary are left unread until the stream has applied what it holds. */
  private readingPaused = false;
  private readonly backoff: Backoff;
  /** Last uses of global tokens written here and not yet sent to the primary (docs/http-api.md, "Last use"). */
  private readonly unreported = new Map<string, number>();

  constructor(
    store: Store,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    private readonly options: SecondaryOptions,
  ) {
    this.backoff = new Backoff(options.backoffMinMs, options.backoffMaxMs);
    this.contact = options.contact ?? new PrimaryContact();
    this.stream = new SecondaryStream(
      store,
      {
        send: (frame) => this.send(frame),
        succeeded: () => this.succeed(),
        failed: (message) => this.fail(message),
        abort: (message) => {
          this.fail(message);
          this.ws?.terminate();
        },
        stalePrimary: (epoch, seen) =>
          this.options.onEvent?.('stale-primary', { Primary: this.options.primaryDatacenter, Epoch: epoch, Seen: seen }),
        handover: (epoch, upTo) => this.options.onHandover?.(epoch, upTo),
        // What a new primary's snapshot replaced or removed (docs/datacenters.md), named in the audit log.
        rolledBack: (objects, index) => {
          for (let i = 0; i < objects.length; i += ROLLED_BACK_PER_LINE)
            this.options.onEvent?.('rolled-back', {
              Primary: this.options.primaryDatacenter,
              Index: index,
              Count: objects.length,
              Objects: objects.slice(i, i + ROLLED_BACK_PER_LINE),
            });
        },
        // The primary's frames wait on TCP while this server writes what it has; it is alive meanwhile.
        pause: () => {
          this.readingPaused = true;
          this.ws?.pause();
        },
        resume: () => {
          this.readingPaused = false;
          this.heartbeat?.heard();
          this.ws?.resume();
        },
      },
      logger,
      metrics,
    );
  }

  async start(): Promise<void> {
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
    // Logged until it is fixed, as Consul does: each new reason at once, the same one again a minute later.
    const now = Date.now();
    if (message !== this.logged.message || now - this.logged.at >= FAILURE_LOG_EVERY_MS) {
      this.logged = { message, at: now };
      this.logger.warn({ primary: this.options.primaryDatacenter }, `replication: ${message}`);
    }
  }

  /** The failure last logged, and when: a reconnect loop logs each reason once a minute, not at every try. */
  private logged = { message: '', at: 0 };

  /** The primary datacenter's leader, when a follower there named it (docs/servers.md, "Several servers per datacenter"); else primaryAddress. */
  private redirect: string | undefined;
  /** The primary's server this secondary streams from now (its leader), once welcomed. */
  private streamingFrom: string | undefined;
  private attempt = 0;

  /**
   * Where a follower of the primary datacenter says its leader is, if this secondary may send
   * its replication token there: a plain HOST:PORT, and (without TLS that proves the peer's
   * name) one of the configured primary addresses. A follower names only a leader it has proven,
   * but without TLS nothing here can check that, so the operator's list is the trust anchor.
   */
  private trustedRedirect(leader: string, configured: string[]): { ok: true; url: string } | { ok: false; reason: string } {
    const { transport } = this.options;
    if (!isPeerAddress(leader)) return { ok: false, reason: 'the leader it names is not HOST:PORT' };
    const url = transport.peerURL(leader);
    if (transport.verifiesPeers) return { ok: true, url };
    const host = (u: string): string => new URL(transport.peerURL(u)).host;
    if (configured.some((c) => host(c) === new URL(url).host)) return { ok: true, url };
    return {
      ok: false,
      reason:
        `${leader} is not one of primary_address, and without TLS a server it names cannot prove itself; list every server of the ` +
        `primary datacenter in primary_address`,
    };
  }

  /** The primary hands the key this datacenter vouches for its forwarded clients with (transport/forward-keys.ts). */
  private keepForwardKey(header: string | string[] | undefined): void {
    if (typeof header === 'string' && /^[A-Za-z0-9_-]{43}$/.test(header))
      this.options.transport.forwardKeys.hold(this.options.primaryDatacenter, Buffer.from(header, 'base64url'));
  }

  /** A connection to the primary's server at `target`, naming the range of versions this release speaks. */
  private dial(target: string): WebSocket {
    const { transport } = this.options;
    // `version` its lowest (which a primary of 0.1.0 checks), `max` its highest.
    const url = transport.websocketURL(target, REPLICATION_PATH, {
      version: String(REPLICATION_PROTOCOL.min),
      max: String(REPLICATION_PROTOCOL.max),
    });
    return new WebSocket(url, {
      ...transport.websocketOptions({ datacenter: this.options.primaryDatacenter }),
      headers: { 'X-Service-Token': this.options.token as string, 'X-Service-Datacenter': this.options.datacenter },
      handshakeTimeout: 5000,
      maxPayload: 256 * 1024 * 1024,
      perMessageDeflate: false,
    });
  }

  private connect(): void {
    if (this.stopped) return;
    // Several addresses (every server of the primary datacenter): the next one after each failure.
    const configured = this.options.primaryAddress.split(',').map((u) => u.trim());
    const redirected = this.redirect !== undefined;
    const target = this.redirect ?? (configured[this.attempt++ % configured.length] as string);
    // A named leader is tried once; after that the configured address again.
    this.redirect = undefined;
    const ws = this.dial(target);
    this.ws = ws;

    // The version agreed (a primary of 0.1.0 says none: it speaks PROTOCOL_VERSION), and the forwarding key.
    let version = PROTOCOL_VERSION;
    ws.on('upgrade', (res) => {
      const agreed = res.headers[PROTOCOL_HEADER];
      version = typeof agreed === 'string' ? Number(agreed) : PROTOCOL_VERSION;
      this.keepForwardKey(res.headers[FORWARD_KEY_HEADER]);
    });
    let refused = false;
    ws.on('unexpected-response', (_req, res) => {
      refused = true;
      this.refusedBy(res, redirected ? undefined : configured, () => ws.terminate());
    });
    const heartbeat = new Heartbeat({
      everyMs: this.options.heartbeatMs,
      deadAfterMs: this.options.deadPeerMs,
      beat: () => {
        // Not reading (frames wait while a snapshot is written): the primary is not silent.
        if (this.readingPaused) heartbeat.heard();
        this.send({ t: 'ping', time: Date.now() });
        this.sendUses();
        this.reportServers(version);
      },
      silent: () => {
        this.fail('the primary went silent; reconnecting');
        ws.terminate();
      },
    });
    ws.on('open', () => {
      this.heartbeat?.stop();
      this.heartbeat = heartbeat;
      heartbeat.start();
      if (!(version >= REPLICATION_PROTOCOL.min && version <= REPLICATION_PROTOCOL.max)) {
        this.fail(
          `the primary agreed replication protocol ${version}, which this release does not speak (${rangeText(REPLICATION_PROTOCOL)})`,
        );
        return void ws.terminate();
      }
      this.send(this.stream.hello(this.options.datacenter, this.options.address(), version));
    });
    ws.on('message', (data) => {
      heartbeat.heard();
      this.contact.heardDirectly();
      let frame: PrimaryFrame;
      try {
        frame = decodeFrame(primaryFrame, data);
      } catch (err) {
        this.fail(`malformed frame from the primary: ${(err as Error).message}`);
        ws.close(1008, 'malformed frame');
        return;
      }
      if (frame.t === 'cluster') return void this.heardCluster(frame.picture);
      const welcomed = this.stream.isWelcomed();
      this.stream.receive(frame);
      if (!welcomed && frame.t === 'welcome') {
        this.streamingFrom = this.options.transport.peerURL(target);
        this.metrics.replicationConnected.set(1);
        this.options.onEvent?.('replication-connect', { Primary: this.options.primaryDatacenter, Address: target });
        // At once, not at the next heartbeat: features that wait for every server wait no longer than that.
        this.serversReported = '';
        this.reportServers(version);
      }
    });
    ws.on('error', (err) => {
      // A refused upgrade already said why; the error that follows its teardown says nothing new.
      if (!this.stream.isWelcomed() && !refused) this.fail(`cannot reach the primary at ${target}: ${describeConnectError(err)}`);
    });
    ws.on('close', (code, reason) => {
      const wasConnected = this.stream.isWelcomed();
      if (wasConnected) this.options.onEvent?.('replication-disconnect', { Primary: this.options.primaryDatacenter, Code: code });
      heartbeat.stop();
      if (this.ws !== ws) return;
      this.ws = undefined;
      this.streamingFrom = undefined;
      // Frames of a closed connection are dropped: the next one resumes from the cursor.
      this.stream.disconnected();
      this.readingPaused = false;
      this.metrics.replicationConnected.set(0);
      if (wasConnected && code !== 1000) {
        const why = reason.toString();
        if (!this.lastErrorMessage || why) this.fail(`connection to the primary closed (${code}${why ? `: ${why}` : ''})`);
      }
      this.scheduleReconnect();
    });
  }

  /**
   * The primary refused the upgrade: why, told once its answer is read; a follower of the primary
   * datacenter names its leader (421), gone to at once unless `configured` is undefined (this
   * attempt was already a redirect: a stale name does not start a loop).
   */
  private refusedBy(res: IncomingMessage, configured: string[] | undefined, end: () => void): void {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (c: string) => (body += c.slice(0, 1000)));
    res.on('end', () => {
      const leader = res.headers['x-service-leader'];
      if (res.statusCode === 421 && typeof leader === 'string' && configured !== undefined) {
        const named = this.trustedRedirect(leader, configured);
        if (named.ok) this.redirect = named.url;
        else this.logger.warn({ named: leader.slice(0, 300) }, `replication: not following the primary's redirect: ${named.reason}`);
      }
      this.fail(`the primary refused replication (HTTP ${res.statusCode}): ${body.trim() || res.statusMessage}`);
      end();
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

  /** Uses of global tokens this datacenter wrote: sent to the primary with the next heartbeats. */
  reportUses(uses: ReadonlyArray<readonly [string, number]>): void {
    for (const [id, ms] of uses) if (this.unreported.size < MAX_UNREPORTED || this.unreported.has(id)) this.unreported.set(id, ms);
  }

  private sendUses(): void {
    if (this.unreported.size === 0 || this.ws?.readyState !== WebSocket.OPEN) return;
    const uses: Array<[string, number]> = [];
    for (const [id, ms] of this.unreported) {
      if (uses.length >= USES_PER_REPORT) break;
      uses.push([id, ms]);
      this.unreported.delete(id);
    }
    this.send({ t: 'uses', uses });
  }

  /** This datacenter's servers as last reported to the primary (their text). */
  private serversReported = '';

  /** Version 5: this datacenter's servers and their releases, told to the primary when they change. */
  private reportServers(version: number): void {
    const book = this.options.releases;
    if (book === undefined || version < 5 || !this.stream.isWelcomed()) return;
    const servers = book.picture().Datacenters[0]?.Servers ?? [];
    const text = JSON.stringify(servers);
    if (text === this.serversReported) return;
    this.serversReported = text;
    this.send({ t: 'servers', servers });
  }

  /** The primary's picture of the cluster: kept, and a finalized level it names made durable here. */
  private async heardCluster(picture: ClusterPicture): Promise<void> {
    const book = this.options.releases;
    if (book === undefined) return;
    book.heard(picture);
    if (picture.Finalized !== null)
      await book.finalize(picture.Finalized).catch((err: unknown) => this.logger.warn({ err }, 'upgrade: cannot keep the finalized level'));
  }

  private send(frame: SecondaryFrame): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(encodeFrame(frame), () => undefined);
  }

  private succeed(): void {
    this.lastSuccess = new Date().toISOString();
    this.lastErrorMessage = '';
    this.backoff.reset();
  }

  /** Resolves true once local state includes the primary's index `index`, false after `timeoutMs`. */
  waitForApplied(index: number, timeoutMs: number): Promise<boolean> {
    return this.stream.waitForApplied(index, timeoutMs);
  }

  /**
   * A write about to go to the primary: its answer's index is looked for here. From a primary
   * that takes no write once its leader stops leading, over whichever connection brings it (its
   * successor holds every write it acknowledged); from one that did (FENCED_ON_STOP), only over the
   * connection live now: once that ends first, whether the write was kept is unknown.
   */
  sending(): (index: number, timeoutMs: number) => Promise<Arrival> {
    const now = this.stream.current();
    const bound = now !== undefined && now.version < FENCED_ON_STOP.replication ? now.generation : undefined;
    return async (index, timeoutMs) => {
      const how = await this.stream.awaitApplied(index, timeoutMs, bound);
      return how === 'reached' ? 'applied' : how === 'ended' ? 'unknown' : 'pending';
    };
  }

  isConnected(): boolean {
    return this.stream.isWelcomed();
  }

  /** The primary's server this secondary replicates from now (the primary's leader): where its forwarded writes go first. */
  primaryServer(): string | undefined {
    return this.streamingFrom;
  }

  /** How long the primary has been silent, ms (across reconnections; since start while never heard). */
  silentForMs(): number {
    return this.contact.silentForMs();
  }

  lastContactMs(): number {
    return this.heartbeat?.sinceHeardMs() ?? 0;
  }

  datacenters(): DatacenterInfo[] {
    return this.stream.datacenters();
  }

  appliedIndex(): number {
    return this.stream.appliedIndex();
  }

  /** GET /v1/acl/replication, with Consul's field names. */
  status(): ReplicationStatusResponse {
    const applied = this.stream.appliedIndex();
    const primaryIndex = this.stream.primaryIndexSeen();
    const conflicts = this.stream.secretConflicts();
    return {
      Enabled: true,
      Running: this.running,
      SourceDatacenter: this.options.primaryDatacenter,
      ReplicationType: 'tokens',
      ReplicatedIndex: applied,
      ReplicatedRoleIndex: applied,
      ReplicatedTokenIndex: applied,
      LastSuccess: this.lastSuccess,
      LastError: this.lastError,
      LastErrorMessage: this.lastErrorMessage,
      Connected: this.stream.isWelcomed(),
      PrimaryIndex: primaryIndex,
      LagEntries: Math.max(0, primaryIndex - applied),
      LastContactMs: this.lastContactMs(),
      ...(conflicts.length > 0 ? { SecretConflicts: conflicts } : {}),
    };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    this.heartbeat?.stop();
    const ws = this.ws;
    this.ws = undefined;
    await this.stream.stop();
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
      ws.close(1000, 'secondary shutting down');
      await Promise.race([closed, new Promise((r) => setTimeout(r, 1000))]);
      ws.terminate();
    }
  }
}
