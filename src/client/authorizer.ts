import type { Authorizer as CompiledAuthorizer } from '../domain/rules/authorizer.js';
import { type Access, RESOURCES } from '../domain/rules/decisions.js';
import { type TokenAuthorizerResponse, tokenAuthorizerResponse } from '../api/schemas.js';
import { EventEmitter } from 'node:events';
import { WatchwordApiError, type WatchwordClient } from './client.js';
import { WELL_FORMED_SECRET, failureOf, failureOfStatus, sleep } from './failures.js';
import { ServerSet } from './server-set.js';
import { ViewCompiler, monotonic } from './compiled-views.js';
import { TokenWatch, type WatchLoss, type WatchNews } from './token-watch.js';
import { type LookUpAnswer, WatchLookUps } from './watch-lookups.js';
import { BlockingReadSet } from './blocking-reads.js';
import { type Entry, newEntry, signalOf, stopEntry, unknownEntry } from './authorizer-entry.js';
import { DecisionReports } from './decision-reports.js';
import type {
  AuthorizerDownEvent,
  AuthorizerOptions,
  AuthorizerStats,
  AuthorizerUpEvent,
  CheckPlace,
  DownPolicy,
  WatchState,
} from './authorizer-types.js';
import { checkedOptions } from './authorizer-types.js';

export type { AuthorizerDownEvent, AuthorizerOptions, AuthorizerStats, AuthorizerUpEvent, CheckPlace, DownPolicy, WatchState };

/** First look-ups of new secrets in flight at once; past it, a new secret is denied without asking. */
const MAX_LOADING = 1_000;
/** Secrets remembered as unknown, at most (and never more than maxTokens). */
const MAX_NEGATIVE = 1_000;

/** How long a watch may stay lost (failing to open, or to open again) before tokens are kept current by blocking reads meanwhile. */
const WATCH_GRACE_MS = 10_000;

/**
 * Judges other callers' tokens in-process (docs/enforcing-client.md, "Enforcing policies in your service"), for services that enforce the policies
 * stored in watchword. A secret is resolved once (its token, links and policies in one call),
 * compiled with the daemon's own rules engine, and kept fresh over one watch of every cached
 * token (a WebSocket opened with the service's own `token`, which needs acl:read: `token-watch.ts`),
 * so a deleted or changed token is seen as soon as the daemon has it, whatever the number of
 * tokens. Without the watch (no `token`, an older daemon, a proxy that does not carry WebSocket
 * upgrades) the `blockingReads` most used tokens are each kept current by a blocking read, and
 * the rest are read again when next asked about after a TTL; a warning says so once. The
 * anonymous token is never on the watch: it is kept current by a blocking read. Cached answers
 * are synchronous: `allowed()` returns a boolean for a known secret and a promise only while one
 * is resolved. At most `maxConnections` HTTP connections (default 1), the watch, and the
 * blocking reads are open at once.
 *
 * Given several `addresses` (the servers of a datacenter) it passes over one that cannot be
 * reached for the next; it tells `'down'` when none can be and `'up'` when one answers again,
 * and counts its work in `stats()`.
 *
 * ```ts
 * const authz = new Authorizer({ addresses: ['http://10.0.0.1:8500', 'http://10.0.0.2:8500'] });
 * authz.on('down', (e) => log.warn(`watchword unreachable (${e.reason}): ${e.downPolicy} in force`));
 * // The caller's header as it came: absent (undefined) or empty means the anonymous token.
 * if (!(await authz.allowed(req.headers['x-service-token'], 'service', 'web', 'write'))) reply.code(403);
 * ```
 */
export class Authorizer extends EventEmitter<{ down: [AuthorizerDownEvent]; up: [AuthorizerUpEvent] }> {
  /** The servers, one client each, asked in turn while they cannot be reached. */
  private readonly servers: ServerSet;
  private readonly counters = { hits: 0, misses: 0, refreshes: 0, downAnswers: 0, failovers: 0 };
  private readonly ttl: number;
  private readonly down: DownPolicy;
  private readonly maxTokens: number;
  private readonly negativeTTL: number;
  private readonly maxNegative: number;
  /** Resolved tokens (at most maxTokens) and first resolutions in flight (at most MAX_LOADING). */
  private readonly entries = new Map<string, Entry>();
  private loadingCount = 0;
  /**
   * Secrets the daemon answered as unknown (deleted, expired, never made), with when: kept apart
   * from real tokens and bounded on their own, so made-up secrets never push a real token out.
   */
  private readonly negative = new Map<string, number>();
  /** Views compiled, their policies' rules parsed once by their text. */
  private readonly views = new ViewCompiler();
  private closed = false;
  /** Cached tokens by their number on the watch. */
  private readonly byId = new Map<number, Entry>();
  private nextId = 1;
  /** The one connection that keeps every cached token current and carries first look-ups; opened with the first question. */
  private watch: TokenWatch | undefined;
  /** First look-ups under way over the watch. */
  private readonly lookUps: WatchLookUps;
  /** The last addition the watch acknowledged, and when it last spoke (every token added by then is current as of it). */
  private watchAck = -1;
  private watchSaidAt = 0;
  /** Reports uses to the daemon and forgets idle tokens. */
  private sweeper: NodeJS.Timeout | undefined;
  private lastReport = 0;
  /** Denials and a sample of allows, told to the daemon once a second over the watch (decision-reports.ts); undefined: not told. */
  private readonly reports: DecisionReports | undefined;
  private reporter: NodeJS.Timeout | undefined;
  /** The service's own token, which opens the watch; without it there is none. */
  private readonly ownToken: string | undefined;
  /** Why the watch is not open, when it was refused (or there is no token for it). */
  private watchRefused: string | undefined;
  /** Tokens kept current by a blocking read each while the watch cannot be had, and their own connections. */
  private readonly blocking: BlockingReadSet<Entry>;
  private readonly blockingClients: WatchwordClient[];
  private blockingTimer: NodeJS.Timeout | undefined;
  /** Since when the watch has failed to open or stayed lost (0: open, or its first attempt is still under way). */
  private watchDownSince = 0;
  private warned = false;
  private readonly warn: (message: string) => void;

  constructor(options: AuthorizerOptions = {}) {
    super();
    const o = checkedOptions(options);
    this.ttl = o.ttl;
    this.down = o.down;
    this.maxTokens = o.maxTokens;
    this.maxNegative = Math.min(this.maxTokens, MAX_NEGATIVE);
    this.negativeTTL = o.negativeTTL;
    if (o.reportAs !== undefined) this.reports = new DecisionReports(o.reportAs);
    this.ownToken = o.ownToken;
    this.lookUps = new WatchLookUps(o.timeoutMs);
    if (this.ownToken === undefined) this.watchRefused = 'no token was given for the watch (the option token, which needs acl:read)';
    const { clients, blockingReads } = o;
    this.servers = new ServerSet(clients, {
      down: (since, reason) => this.emit('down', { since, reason, downPolicy: this.down }),
      up: (downForMs, address) => this.emit('up', { downForMs, address }),
      failover: () => this.counters.failovers++,
    });
    this.blockingClients = clients.map((c) => c.with({ maxConnections: Math.max(1, blockingReads) }));
    this.blocking = new BlockingReadSet(blockingReads, (entry, stop) => this.holdBlockingRead(entry, stop));
    this.warn = o.warn;
  }

  /**
   * May the token with this secret have `access` to `resource` `segment`? `undefined`, `null`
   * and `''` (no token sent) mean the anonymous token; any other non-string throws a TypeError.
   * A boolean when the token is cached, else a promise (await works on both). Unknown, deleted
   * and expired tokens, and secrets no daemon could accept, are denied; an unknown resource or
   * access throws.
   */
  allowed(
    secret: string | undefined | null,
    resource: string,
    segment: string,
    access: Access,
    place?: CheckPlace,
  ): boolean | Promise<boolean> {
    const spec = Object.hasOwn(RESOURCES, resource) ? RESOURCES[resource] : undefined;
    if (spec === undefined || !spec.accesses.includes(access)) throw new TypeError(`unknown resource or access: ${resource} ${access}`);
    if (secret === undefined || secret === null) secret = '';
    else if (typeof secret !== 'string') throw new TypeError(`secret: expected a string, undefined or null; got ${typeof secret}`);
    else if (secret !== '' && !WELL_FORMED_SECRET.test(secret)) {
      this.counters.hits++;
      this.reports?.noteUnknown();
      return false;
    }
    const now = Date.now();
    const entry = this.entries.get(secret);
    if (entry !== undefined) {
      entry.usedAt = now;
      if (entry.authorizer !== undefined) {
        const live = monotonic() < entry.expiresAt;
        if (!live || now - this.confirmed(entry) < this.ttl) {
          this.counters.hits++;
          if (live && entry.sentSeq === undefined) this.blocking.used(entry);
          return live && this.judge(entry, resource, segment, access, place);
        }
        return this.stale(entry, resource, segment, access, place);
      }
      if (entry.loading !== undefined) {
        this.counters.misses++;
        return entry.loading.then(() => this.afterLoad(entry, resource, segment, access, place));
      }
      this.entries.delete(secret);
    }
    const gone = this.negative.get(secret);
    if (gone !== undefined) {
      if (now - gone < this.negativeTTL) {
        this.counters.hits++;
        this.reports?.noteUnknown();
        return false;
      }
      this.negative.delete(secret);
    }
    if (this.closed) return this.down === 'allow';
    // So many first look-ups in flight (a flood of new secrets): the next is denied, not queued behind them.
    if (this.loadingCount >= MAX_LOADING) {
      this.counters.hits++;
      return false;
    }
    this.counters.misses++;
    const fresh = this.add(secret, now);
    return (fresh.loading as Promise<void>).then(() => this.afterLoad(fresh, resource, segment, access, place));
  }

  /** Tokens cached right now. */
  get size(): number {
    return this.entries.size;
  }

  /** Counters since this Authorizer was made, and whether the down policy is in force now. */
  stats(): AuthorizerStats {
    return {
      ...this.counters,
      cached: this.entries.size,
      down: this.servers.down,
      address: this.servers.address,
      reports: this.reports?.stats.reports ?? 0,
      reportsDropped: this.reports?.stats.dropped ?? 0,
      watch: this.watchState(),
      blockingReads: this.blocking.size,
    };
  }

  private watchState(): WatchState {
    if (this.ownToken === undefined) return 'off';
    if (this.watch?.isOpen) return 'open';
    return this.watchRefused !== undefined ? 'unavailable' : 'connecting';
  }

  /** Stops the watch; later questions about unknown secrets get the down policy's answer. */
  close(): void {
    this.closed = true;
    this.reportNow();
    this.lookUps.close();
    this.watch?.close();
    this.blocking.stop();
    clearInterval(this.sweeper);
    clearInterval(this.reporter);
    clearInterval(this.blockingTimer);
    for (const e of this.entries.values()) stopEntry(e);
    this.entries.clear();
    this.byId.clear();
    this.negative.clear();
  }

  private judge(entry: Entry, resource: string, segment: string, access: Access, place: CheckPlace | undefined): boolean {
    const a = entry.authorizer as CompiledAuthorizer;
    const partition = place?.partition || a.tokenPartition;
    const namespace = place?.namespace || a.tokenNamespace;
    const allowed = a.allows(resource, segment, access, partition, namespace);
    this.reports?.note(entry.id, resource, segment, access, partition, namespace, allowed);
    return allowed;
  }

  /** Tells the daemon the decisions noted since the last report (dropped and counted when the watch is not connected). */
  private reportNow(): void {
    this.reports?.flush((frame) => this.watch?.report(frame) ?? false);
  }

  private afterLoad(entry: Entry, resource: string, segment: string, access: Access, place: CheckPlace | undefined): boolean {
    if (entry.authorizer !== undefined) return monotonic() < entry.expiresAt && this.judge(entry, resource, segment, access, place);
    // Never resolved. Only an unreachable daemon lets the down policy speak; nothing cached to extend.
    if (entry.goneAt !== undefined) {
      this.reports?.noteUnknown();
      return false;
    }
    if (entry.failing !== 'unreachable') return false;
    this.counters.downAnswers++;
    return this.down === 'allow';
  }

  /** The daemon has not confirmed this token for a TTL: the watch is down, or the daemon has none. */
  private stale(
    entry: Entry,
    resource: string,
    segment: string,
    access: Access,
    place: CheckPlace | undefined,
  ): boolean | Promise<boolean> {
    this.watch?.kick();
    const refreshing = this.refresh(entry);
    // Served stale only while a refresh is under way or for a real outage; a 429 or a broken answer is not one.
    if (this.down === 'async-cache' && (entry.failing === undefined || entry.failing === 'unreachable')) {
      if (entry.failing === 'unreachable') this.counters.downAnswers++;
      else this.counters.hits++;
      return this.judge(entry, resource, segment, access, place);
    }
    const decide = (): boolean => {
      if (entry.failing === 'unreachable') this.counters.downAnswers++;
      if (entry.authorizer === undefined) return false;
      if (monotonic() >= entry.expiresAt) return false;
      // Confirmed again while this question waited: judged afresh.
      if (Date.now() - this.confirmed(entry) < this.ttl) return this.judge(entry, resource, segment, access, place);
      switch (entry.failing) {
        case undefined:
          // No answer yet to the refresh this question waited for: its last word holds until the refresh fails.
          return this.judge(entry, resource, segment, access, place);
        // The daemon is up but will not confirm the token now (429) or answered what cannot be read: past the TTL, denied.
        case 'limited':
        case 'broken':
          return false;
        case 'unreachable':
          if (this.down === 'allow') return true;
          if (this.down === 'deny') return false;
          return this.judge(entry, resource, segment, access, place);
      }
    };
    if (refreshing === undefined) {
      this.counters.hits++;
      return decide();
    }
    this.counters.misses++;
    return refreshing.then(decide);
  }

  /**
   * Reads a stale entry again (one read at a time per entry; after a failure, not before its
   * back-off: 250 ms doubling to 5 s, or the daemon's Retry-After for a 429). Undefined while
   * backing off.
   */
  private refresh(entry: Entry): Promise<void> | undefined {
    if (entry.attempt !== undefined) return entry.attempt;
    if (Date.now() < entry.retryAt || entry.stopped) return undefined;
    entry.attempt = this.fetch(entry).then(
      () => {
        entry.attempt = undefined;
        entry.failures = 0;
        if (entry.goneAt !== undefined) this.markGone(entry);
      },
      () => {
        entry.attempt = undefined;
        entry.failures++;
        const backoff = Math.min(250 * 2 ** (entry.failures - 1), 5_000);
        const pause = entry.failing === 'limited' ? Math.min(Math.max(1_000, (entry.retryAfter ?? 1) * 1_000), 60_000) : backoff;
        entry.retryAt = Date.now() + pause;
      },
    );
    return entry.attempt;
  }

  private add(secret: string, now: number): Entry {
    const entry = newEntry(secret, this.nextId++, now);
    this.entries.set(secret, entry);
    this.loadingCount++;
    entry.loading = this.firstLook(entry).then(
      () => {
        entry.loading = undefined;
        this.loadingCount--;
        if (entry.authorizer === undefined) return this.markGone(entry);
        // A real token: it may take the place of the least recently used one.
        if (this.entries.size - this.loadingCount > this.maxTokens) this.evictOne(entry);
        this.watched(entry);
      },
      () => {
        entry.loading = undefined;
        this.loadingCount--;
        if (entry.failing === 'unreachable') {
          // Asked again on the next question: the daemon may be back.
          this.forget(entry);
        } else {
          // Rate-limited or not understood: denied, and not asked again for a moment.
          entry.goneAt = Date.now();
          this.markGone(entry);
        }
      },
    );
    return entry;
  }

  /**
   * The first resolution of a secret: over the watch when it is open (or opening) and takes
   * look-ups, else over HTTP; answered by the same rules either way (403: gone; 429: limited;
   * 5xx, a timeout: unreachable). What the watch could not answer is asked over HTTP.
   */
  private async firstLook(entry: Entry): Promise<void> {
    const watch = entry.secret === '' || this.watchRefused !== undefined ? undefined : this.openWatch();
    // Open and older than look-ups, or lost a while: HTTP at once.
    if (watch === undefined || (watch.isOpen ? !watch.looksUp : this.watchDownSince > 0)) return this.fetch(entry);
    this.byId.set(entry.id, entry);
    const sentSeq = watch.looksUp ? watch.add(entry.id, entry.secret, '') : undefined;
    if (sentSeq !== undefined) entry.sentSeq = sentSeq;
    const answer: LookUpAnswer = await this.lookUps.ask(entry.id, sentSeq);
    if (answer.t === 'found' || entry.stopped) return;
    entry.sentSeq = undefined;
    switch (answer.t) {
      case 'gone':
        return unknownEntry(entry);
      case 'unanswered':
        return this.fetch(entry);
      default:
        entry.failing = answer.t === 'refused' ? failureOfStatus(answer.status) : answer.t === 'timedOut' ? 'unreachable' : 'broken';
        entry.retryAfter = answer.t === 'refused' && answer.retryAfter > 0 ? answer.retryAfter : undefined;
        throw new Error(`the first look-up over the watch was not answered (${answer.t})`);
    }
  }

  /** The daemon does not know this secret (or cannot answer for it now): remembered apart from real tokens. */
  private markGone(entry: Entry): void {
    this.forget(entry);
    this.negative.delete(entry.secret);
    this.negative.set(entry.secret, entry.goneAt ?? Date.now());
    if (this.negative.size > this.maxNegative) this.negative.delete(this.negative.keys().next().value as string);
  }

  /** Drops the least recently used real token (never `keep`, nor one still loading). */
  private evictOne(keep: Entry): void {
    let oldest: Entry | undefined;
    for (const e of this.entries.values())
      if (e !== keep && e.authorizer !== undefined && (oldest === undefined || e.usedAt < oldest.usedAt)) oldest = e;
    if (oldest !== undefined) this.forget(oldest);
  }

  private forget(entry: Entry): void {
    stopEntry(entry);
    this.blocking.drop(entry);
    if (this.entries.get(entry.secret) === entry) this.entries.delete(entry.secret);
    if (this.byId.get(entry.id) !== entry) return;
    this.byId.delete(entry.id);
    if (entry.sentSeq !== undefined) this.watch?.remove([entry.id]);
    entry.sentSeq = undefined;
  }

  /**
   * One request for the token's rules (with `blocking`, held by the daemon until they differ
   * from the entry's or the wait ends). A 403 marks the token gone; any other failure throws,
   * with its kind in `entry.failing`.
   */
  private async fetch(entry: Entry, blocking?: { signal: AbortSignal; waitMs: number }): Promise<void> {
    const own = signalOf(entry);
    const signal = blocking === undefined ? own : AbortSignal.any([own, blocking.signal]);
    try {
      const r = await this.servers.ask(
        signal,
        (client) =>
          client.acl.tokenAuthorizer({
            token: entry.secret,
            signal,
            ...(blocking !== undefined && entry.hash !== undefined
              ? { hash: entry.hash, wait: `${Math.ceil(blocking.waitMs / 1000)}s` }
              : {}),
          }),
        blocking === undefined ? this.servers.clients : this.blockingClients,
      );
      const view = tokenAuthorizerResponse.safeParse(r.value);
      if (!view.success) throw new TypeError('the daemon answered a token authorizer that does not match its schema');
      if (entry.authorizer !== undefined) this.counters.refreshes++;
      entry.confirmedAt = Date.now();
      entry.failing = undefined;
      entry.retryAfter = undefined;
      if (r.contentHash === undefined || r.contentHash !== entry.hash || entry.authorizer === undefined)
        this.install(entry, view.data, r.contentHash);
    } catch (err) {
      if (signal.aborted) throw err;
      if (err instanceof WatchwordApiError && err.status === 403) return unknownEntry(entry);
      entry.failing = failureOf(err);
      entry.retryAfter = err instanceof WatchwordApiError ? err.retryAfter : undefined;
      throw err;
    }
  }

  private install(entry: Entry, view: TokenAuthorizerResponse, hash: string | undefined): void {
    const { authorizer, expiresAt } = this.views.compile(view);
    entry.authorizer = authorizer;
    entry.expiresAt = expiresAt;
    entry.hash = hash;
  }

  /**
   * A resolved token joins the watch (opened with the first one), or, while the watch cannot be
   * had (and always for the anonymous token, which is never watched), may take a blocking read.
   */
  private watched(entry: Entry): void {
    this.byId.set(entry.id, entry);
    this.startTimers();
    const watch = entry.secret === '' ? undefined : this.openWatch();
    if (watch === undefined) return this.withoutWatch(entry);
    // A first look-up over the watch left it there already.
    entry.sentSeq ??= watch.add(entry.id, entry.secret, entry.hash ?? '');
    if (entry.sentSeq === undefined) this.withoutWatch(entry);
  }

  /** The watch (opened with the first question; undefined: there is no token for it). */
  private openWatch(): TokenWatch | undefined {
    if (this.watch !== undefined || this.ownToken === undefined || this.closed) return this.watch;
    const watch = new TokenWatch({
      clients: this.servers.clients,
      token: this.ownToken,
      // Beats well inside the TTL, so a token stays confirmed through a lost beat or two.
      beatMs: Math.min(10_000, Math.max(250, Math.floor(this.ttl / 3))),
      onOpen: () => {
        this.watchDownSince = 0;
        this.watchRefused = undefined;
        // Tokens resolved are added again; look-ups that waited for the watch are sent (or asked over HTTP).
        for (const e of this.byId.values())
          if (e.secret !== '' && e.authorizer !== undefined) e.sentSeq = watch.add(e.id, e.secret, e.hash ?? '');
        this.lookUps.sendWaiting((id) => {
          const e = this.byId.get(id);
          if (e === undefined || !watch.looksUp) return undefined;
          e.sentSeq = watch.add(id, e.secret, '');
          return e.sentSeq;
        });
      },
      onNews: (news) => this.news(news),
      onLost: (loss, reason) => this.watchLost(loss, reason),
    });
    this.watch = watch;
    return watch;
  }

  /** The timers of a client holding tokens: uses and idle tokens, reports, blocking reads. */
  private startTimers(): void {
    if (this.sweeper !== undefined) return;
    // Uses reach the daemon well within its flush (a minute by default) without a report per question.
    const every = Math.min(30_000, Math.max(1_000, this.ttl));
    this.sweeper = setInterval(() => this.sweep(), every);
    this.sweeper.unref();
    if (this.reports !== undefined) {
      this.reporter = setInterval(() => this.reportNow(), 1_000);
      this.reporter.unref();
    }
    this.blockingTimer = setInterval(() => this.keepBlockingReads(), 1_000);
    this.blockingTimer.unref();
  }

  /** A round of blocking reads: the most used tokens the watch does not hold get one. */
  private keepBlockingReads(): void {
    if (this.withoutWatchNow()) this.warnOnce();
    this.blocking.keep((e) => this.needsBlockingRead(e));
  }

  /** An entry the watch does not hold: a blocking read at once when one is due and there is room. */
  private withoutWatch(entry: Entry): void {
    if (!this.needsBlockingRead(entry)) return;
    if (entry.secret !== '') this.warnOnce();
    this.blocking.offer(entry);
  }

  /** Says once, the first time tokens are kept current without the watch, why and how. */
  private warnOnce(): void {
    if (this.warned) return;
    this.warned = true;
    this.warn(
      `watchword Authorizer: no watch (${this.watchRefused ?? 'it cannot be opened'}); the ${this.blocking.max} most used tokens are ` +
        `kept current by a blocking read each, the others are read again after tokenTTL (${this.ttl} ms)`,
    );
  }

  /** Whether tokens cannot be kept current by the watch now: none (no token, refused), or not open for a while. */
  private withoutWatchNow(): boolean {
    if (this.ownToken === undefined || this.watchRefused !== undefined) return true;
    if (this.watch?.isOpen) return false;
    return this.watchDownSince > 0 && Date.now() - this.watchDownSince >= WATCH_GRACE_MS;
  }

  /** Whether an entry is one a blocking read would keep current: cached, and the anonymous token or one no watch holds. */
  private needsBlockingRead(entry: Entry): boolean {
    if (this.entries.get(entry.secret) !== entry || entry.authorizer === undefined) return false;
    return entry.secret === '' || (entry.sentSeq === undefined && this.withoutWatchNow());
  }

  /** The watch ended or was refused: what it held is no longer confirmed by it. */
  private watchLost(loss: WatchLoss, reason: string): void {
    if (this.watchDownSince === 0) this.watchDownSince = Date.now();
    this.watchAck = -1;
    this.watchSaidAt = 0;
    for (const e of this.byId.values()) e.sentSeq = undefined;
    this.lookUps.lost();
    if (loss === 'refused') {
      this.watchRefused = reason;
      for (const e of this.byId.values()) this.withoutWatch(e);
    }
  }

  /**
   * Keeps one token current by blocking reads until `stop` (its place is given to a token used
   * more, or the watch is back) or the token goes: each answer confirms it, a change installs
   * the new rules, a 403 marks it gone.
   */
  private async holdBlockingRead(entry: Entry, stop: AbortSignal): Promise<void> {
    const waitMs = Math.max(1_000, Math.floor(this.ttl / 2));
    let failures = 0;
    while (!stop.aborted && !entry.stopped && this.needsBlockingRead(entry)) {
      try {
        await this.fetch(entry, { signal: stop, waitMs });
        failures = 0;
        if (entry.goneAt !== undefined) return this.markGone(entry);
      } catch {
        if (stop.aborted || entry.stopped) return;
        failures++;
        const pause = entry.failing === 'limited' ? Math.max(1_000, (entry.retryAfter ?? 1) * 1_000) : Math.min(250 * 2 ** failures, 5_000);
        await sleep(pause, stop);
      }
    }
  }

  /** What the watch says: tokens changed or gone, and which of those it holds are current now. */
  private news(news: WatchNews): void {
    const now = Date.now();
    if (news.t === 'changes') {
      for (const change of news.set) {
        if (!Array.isArray(change)) continue;
        const [id, hash, view] = change as [unknown, unknown, unknown];
        const entry = typeof id === 'number' ? this.byId.get(id) : undefined;
        if (typeof hash !== 'string') continue;
        if (entry === undefined) continue;
        const parsed = tokenAuthorizerResponse.safeParse(view);
        // A view that cannot be read is not installed: the entry goes stale and is read again (a first look-up is denied).
        if (!parsed.success) {
          this.lookUps.answer(entry.id, { t: 'broken' });
          continue;
        }
        if (entry.authorizer !== undefined) this.counters.refreshes++;
        this.install(entry, parsed.data, hash);
        entry.confirmedAt = now;
        entry.failing = undefined;
        this.lookUps.answer(entry.id, { t: 'found' });
      }
      for (const id of news.gone) {
        const entry = typeof id === 'number' ? this.byId.get(id) : undefined;
        // A first look-up's answer is taken by its own (lookUps.read, below).
        if (entry === undefined || this.lookUps.has(entry.id)) continue;
        entry.authorizer = undefined;
        entry.goneAt = now;
        this.markGone(entry);
      }
    }
    this.lookUps.read(news);
    // Every token added by then is current as of now: one mark for all, not a walk over them.
    this.watchAck = Math.max(this.watchAck, news.ack);
    this.watchSaidAt = now;
  }

  /** When the daemon last confirmed this entry: by a read of it, or by the watch once it has taken it. */
  private confirmed(entry: Entry): number {
    return entry.sentSeq !== undefined && entry.sentSeq <= this.watchAck
      ? Math.max(entry.confirmedAt, this.watchSaidAt)
      : entry.confirmedAt;
  }

  /** Tells the daemon which tokens were judged since the last report (their last use), and forgets tokens unused for two TTLs. */
  private sweep(): void {
    const now = Date.now();
    const idleAfter = Math.max(2 * this.ttl, 10_000);
    const used: number[] = [];
    for (const e of [...this.byId.values()]) {
      if (now - e.usedAt > idleAfter) this.forget(e);
      else if (e.usedAt > this.lastReport && e.sentSeq !== undefined) used.push(e.id);
    }
    this.lastReport = now;
    this.watch?.used(used);
  }
}
