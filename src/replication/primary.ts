import { USES_PER_REPORT } from '../store/last-use.js';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { refuse } from '../transport/refuse.js';
import type { ReleaseBook } from './releases.js';
import { FORWARD_KEY_HEADER } from '../transport/forward-keys.js';
import type { Transport } from '../transport/transport.js';
import { WebSocketServer } from 'ws';
import { isWatchwordError } from '../domain/errors.js';
import { expiryMillis } from '../domain/expiry.js';
import { isValidDatacenterName } from '../domain/grants.js';
import type { TokenRecord } from '../domain/types.js';
import { isWildcardHost, parseHostPort } from '../config/schema.js';
import type { AclResolver } from '../service/acl-resolver.js';
import type { Store } from '../store/store.js';
import {
  type FrameChannel,
  type SecondaryInfo,
  Session,
  type SessionHost,
  type SessionOptions,
  type TokenCheck,
  wsChannel,
} from './primary-session.js';
import { type DatacenterInfo, PROTOCOL_HEADER, REPLICATION_PATH } from './protocol.js';
import { REPLICATION_PROTOCOL, VERSION, negotiate, peerRange, rangeText } from '../version.js';
import { secretOf } from '../transport/credentials.js';
import type { AuditType } from '../domain/audit-types.js';
import { META } from '../store/schema.js';
import { primaryEpochOf } from './apply.js';
import { type Takeover, placementRecord } from './placement.js';

export { CLOSE_TOKEN_REVOKED, type FrameChannel, type SecondaryInfo, Session, wsChannel } from './primary-session.js';

export interface PrimaryOptions extends SessionOptions {
  /** Change-log entries to keep (by index distance). */
  retention: number;
}

export const DEFAULT_PRIMARY_OPTIONS: PrimaryOptions = {
  heartbeatMs: 1000,
  // Checked at every heartbeat: with a ping a second each way, a peer that goes silent
  // is noticed about 8 s later, within the 10 s promised even on a busy machine.
  deadPeerMs: 7000,
  batchEntries: 1000,
  snapshotChunk: 500,
  highWaterBytes: 8 * 1024 * 1024,
  maxUnackedIndexes: 50_000,
  retention: 100_000,
};

/**
 * Datacenters a replication token may replicate as: the datacenters of its node
 * identities. A token without node identities is not bound.
 */
export const boundDatacenters = (token: TokenRecord): string[] => [...new Set(token.NodeIdentities.map((n) => n.Datacenter))];

/** Whether a replication token may stream, and until when. */
/**
 * The primary's end of replication: authenticates secondaries on the WebSocket
 * upgrade, streams its change log to each (snapshot first when needed), and trims the
 * log to its retention.
 */
/** What a secondary hears when its replication token may not replicate, whether it is unknown or lacks acl:write. */
export const TOKEN_REFUSED = 'replication token is invalid or lacks acl:write';

export class ReplicationPrimary implements SessionHost {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  /** What each accepted upgrade's answer says besides accepting: the version spoken, the forwarding key. */
  private readonly answerHeaders = new WeakMap<IncomingMessage, string[]>();
  private readonly sessions = new Set<Session>();
  private readonly unsubscribe: () => void;
  private trimming = false;
  /** The trims under way: a stop waits for them, so none reads a store being closed. */
  private readonly trims = new Set<Promise<unknown>>();
  private lastTrim = 0;
  /** Recent commits as [highest index, when durable], oldest first (bounded). */
  private readonly commitTimes: Array<[number, number]> = [];
  /** Bumped by every commit that touches tokens, policies or roles: sessions re-check their token. */
  aclGeneration = 0;
  /** Set once a change its followers never confirmed became durable here (see CommitEvent.unconfirmed). */
  private halted = false;

  /** The cluster's versions: secondaries report their servers, and are sent the picture. */
  get releases(): ReleaseBook | undefined {
    return this.self.releases;
  }

  /** Whether this stream stopped serving (a later leadership starts a new one). */
  get isHalted(): boolean {
    return this.halted;
  }

  constructor(
    readonly store: Store,
    private readonly resolver: AclResolver,
    readonly logger: Logger,
    readonly options: PrimaryOptions,
    private readonly self: {
      datacenter: string;
      address: () => string;
      transport?: Transport;
      onEvent?: (type: AuditType, details: Record<string, unknown>) => void;
      /** The cluster's versions (replication/releases.ts). */
      releases?: ReleaseBook;
    },
  ) {
    this.wss.on('headers', (headers, req) => headers.push(...(this.answerHeaders.get(req) ?? [])));
    this.unsubscribe = store.onCommit((event) => {
      if (event.tables.has('tokens') || event.tables.has('policies') || event.tables.has('roles')) this.aclGeneration++;
      this.commitTimes.push([event.index, event.at]);
      if (this.commitTimes.length > 4096) this.commitTimes.splice(0, 1024);
      if (event.unconfirmed) {
        // This server's leadership ended before its followers confirmed these changes: the
        // next leader may lack them, so no secondary may hold them. Nothing more is served
        // from this batch log (a later leadership starts a new primary stream).
        this.halted = true;
        for (const s of this.sessions) s.close(1012, 'this server no longer leads its datacenter; reconnecting to its leader');
        return;
      }
      if (event.logReset) {
        // A restore started a new log: every secondary starts over with a snapshot of it.
        for (const s of this.sessions) s.close(1012, 'the primary restored a snapshot; resynchronising');
        this.track(
          this.store
            .trimLog(event.index)
            .catch((err: unknown) => this.logger.error({ err }, 'replication: removing the change log before a restore failed')),
        );
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
    if (this.halted) return refuse(socket, 503, 'this server no longer leads its datacenter; try its leader');
    // The secondary's range (0.1.0 names one version; later releases add `max`): the highest both speak.
    const theirs = peerRange(url.searchParams.get('version'), url.searchParams.get('max'));
    const version = theirs === undefined ? undefined : negotiate(REPLICATION_PROTOCOL, theirs);
    if (version === undefined) {
      return refuse(
        socket,
        426,
        `unsupported replication protocol: the secondary speaks ${theirs ? rangeText(theirs) : '(none)'}, ` +
          `this primary (${VERSION}) speaks ${rangeText(REPLICATION_PROTOCOL)}`,
      );
    }
    // A secondary names itself in a header too, so a token bound elsewhere is refused before the upgrade.
    const header = req.headers['x-service-datacenter'];
    const named = typeof header === 'string' && header !== '' ? header : undefined;
    // With TLS a secondary proves its datacenter with its certificate before anything else (docs/tls.md, "TLS").
    const transport = this.self.transport;
    if (transport?.secure) {
      if (named === undefined) return refuse(socket, 400, 'the secondary did not name its datacenter (X-Service-Datacenter)');
      const proven = transport.proveIncoming(req, named);
      if (proven && !proven.ok) {
        this.logger.warn({ datacenter: named, from: req.socket.remoteAddress }, `replication: refused a secondary: ${proven.reason}`);
        return refuse(socket, 403, `not a server of ${named}: ${proven.reason}`);
      }
    }
    const secret = secretOf(undefined, req.headers);
    if (!secret) return refuse(socket, 403, 'replication token is missing');
    const generation = this.aclGeneration;
    const check = this.checkReplicationToken(secret, named);
    if (!check.ok) {
      // The caller hears one message whatever the reason (an unknown secret is not told from a real token); the log says which.
      if (check.detail)
        this.logger.warn({ datacenter: named, from: req.socket.remoteAddress }, `replication: refused a secondary: ${check.detail}`);
      return refuse(socket, check.status, check.message);
    }
    // An authenticated secondary is handed the key it vouches for its forwarded clients with (transport/forward-keys.ts).
    const forwardKey = named !== undefined ? this.self.transport?.forwardKeys.derive(named) : undefined;
    this.answerHeaders.set(req, [
      `${PROTOCOL_HEADER}: ${version}`,
      ...(forwardKey !== undefined ? [`${FORWARD_KEY_HEADER}: ${forwardKey.toString('base64url')}`] : []),
    ]);
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      let session: Session | undefined;
      session = this.open(
        wsChannel(ws, () => session),
        req.socket.remoteAddress ?? '',
        secret,
        {
          generation,
          expires: check.expires,
          version,
          ...(transport?.secure && named !== undefined ? { datacenter: named } : {}),
        },
      );
    });
  }

  /** A session on an authenticated channel (the upgrade checked the token at `authorized.generation`). */
  open(
    channel: FrameChannel,
    remoteAddress: string,
    secret: string,
    authorized: { generation: number; expires: number | undefined; version?: number },
  ): Session {
    const session = new Session(this, channel, remoteAddress, secret, authorized);
    this.sessions.add(session);
    session.start();
    return session;
  }

  /**
   * Why a secret may not replicate (undefined when it may): it must resolve to a live
   * token with acl:write in the default namespace and partition. An unknown secret and a
   * token without acl:write get one message (`detail`, for the log, says which).
   */
  checkReplicationToken(secret: string, datacenter: string | undefined): TokenCheck {
    try {
      const identity = this.resolver.resolveLocal(secret);
      if (!identity.authorizer.canWrite('default', 'default'))
        return { ok: false, status: 403, message: TOKEN_REFUSED, detail: `token ${identity.token.AccessorID} lacks acl:write` };
      const bound = boundDatacenters(identity.token);
      if (datacenter !== undefined && bound.length > 0 && !bound.includes(datacenter)) {
        return { ok: false, status: 403, message: `replication token is bound to datacenter ${bound.join(', ')}, not ${datacenter}` };
      }
      return { ok: true, expires: expiryMillis(identity.token) };
    } catch (err) {
      if (isWatchwordError(err) && err.code === 'ACL_NOT_FOUND')
        return { ok: false, status: 403, message: TOKEN_REFUSED, detail: 'no live token has that secret' };
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
    if (dc === this.self.datacenter)
      return { ok: false, message: `datacenter ${dc} is the primary itself; a secondary needs a name of its own` };
    const parsed = parseHostPort(hello.address);
    if (!parsed || parsed.port === 0)
      return { ok: false, message: `address ${JSON.stringify(hello.address.slice(0, 64))} is not HOST:PORT` };
    for (const other of this.sessions) {
      if (other === session || other.datacenter !== dc) continue;
      if (other.isLive()) return { ok: false, message: `datacenter ${dc} already has a live replication session` };
      other.close(1001, 'replaced by a new session of the same datacenter');
    }
    const host = isWildcardHost(parsed.host) ? session.remoteAddress.replace(/^::ffff:/, '') : parsed.host;
    if (host === '') return { ok: false, message: `address ${JSON.stringify(hello.address)} names no host` };
    return { ok: true, address: host.includes(':') ? `[${host}]:${parsed.port}` : `${host}:${parsed.port}` };
  }

  /** This primary's epoch (docs/datacenters.md): 1 until a promotion raises it. */
  epoch(): number {
    return primaryEpochOf(this.store);
  }

  /** Where this primary took over from another (docs/datacenters.md), if it did: told to each secondary in its welcome. */
  takeover(): Takeover | undefined {
    const parsed = placementRecord.safeParse(this.store.getMeta(META.placement));
    return parsed.success ? parsed.data.Took : undefined;
  }

  /**
   * A secondary has seen a primary of a higher epoch than this one: this primary is stale, and
   * whatever it streams must never be applied there (logged and audited here; refused there).
   */
  staleFor(datacenter: string, seen: number): void {
    const epoch = this.epoch();
    this.logger.error({ datacenter, epoch, seen }, 'replication: a secondary has seen a newer primary: this one is stale');
    this.self.onEvent?.('stale-primary', { Secondary: datacenter, Epoch: epoch, Seen: seen });
  }

  /** A secondary's stream is admitted (for the audit log). */
  connected(datacenter: string, mode: string): void {
    this.self.onEvent?.('replication-connect', { Secondary: datacenter, Mode: mode });
  }

  /** Every other admitted session hears the list of datacenters at once. */
  announce(newcomer: Session): void {
    for (const s of this.sessions) if (s !== newcomer && s.datacenter) s.ping();
  }

  forget(session: Session): void {
    if (this.sessions.delete(session) && session.datacenter) {
      this.logger.info({ datacenter: session.datacenter }, 'replication: secondary disconnected');
      this.self.onEvent?.('replication-disconnect', { Secondary: session.datacenter });
    }
  }

  /** When the change at `index` became durable (now, when it is older than what is remembered). */
  /** Last uses this primary wrote: those of global tokens go to every secondary (docs/http-api.md, "Last use"). */
  usesWritten(uses: ReadonlyArray<readonly [string, number]>): void {
    if (this.sessions.size === 0) return;
    const global = uses.filter(([id]) => this.store.reader.isGlobalToken(id)) as Array<[string, number]>;
    for (let at = 0; at < global.length; at += USES_PER_REPORT) {
      const chunk = global.slice(at, at + USES_PER_REPORT);
      for (const s of this.sessions) s.sendUses(chunk);
    }
  }

  usesReported(uses: ReadonlyArray<readonly [string, number]>): void {
    const book = this.store.lastUse;
    for (const [id, ms] of uses) {
      // Global tokens only: a Local token of another datacenter is none of this one's.
      if (this.store.reader.isGlobalToken(id)) book.merge(id, ms);
    }
  }

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
      [...this.sessions]
        .filter((s) => s.datacenter)
        .map(async (s) => (await s.checkIDs(ids, timeoutMs)).map((id) => ({ datacenter: s.datacenter, id }))),
    );
    return answers.flat();
  }

  /**
   * A planned transfer (docs/datacenters.md): the connected secondary `datacenter` gets everything up to
   * `upTo`, then the handover to `epoch`. Its address (host:port), or undefined when it is not
   * connected or the handover could not be sent within `timeoutMs`.
   */
  async handOver(datacenter: string, epoch: number, upTo: number, timeoutMs: number): Promise<string | undefined> {
    const session = [...this.sessions].find((s) => s.datacenter === datacenter);
    if (!session) return undefined;
    return (await session.handOver(epoch, upTo, timeoutMs)) ? session.address : undefined;
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
    this.track(
      this.store
        .trimLog(index - retention)
        .then((n) => this.logger.debug({ removed: n, upTo: index - retention }, 'replication: change log trimmed'))
        .catch((err: unknown) => this.logger.error({ err }, 'replication: trimming the change log failed'))
        .finally(() => {
          this.trimming = false;
        }),
    );
  }

  private track(trim: Promise<unknown>): void {
    this.trims.add(trim);
    void trim.finally(() => this.trims.delete(trim));
  }

  async close(): Promise<void> {
    this.unsubscribe();
    for (const s of this.sessions) s.close(1001, 'primary shutting down');
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    // A trim under way ends before the store closes (the daemon closes it next).
    await Promise.all(this.trims);
  }
}
