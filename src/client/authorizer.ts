import { type ApplicablePolicy, Authorizer as CompiledAuthorizer } from '../domain/rules/authorizer.js';
import { type Access, RESOURCES } from '../domain/rules/decisions.js';
import { type ScopeRules, parsePolicyRules } from '../domain/rules/policy.js';
import { type TokenAuthorizerResponse as TokenAuthorizerView, tokenAuthorizerResponse } from '../api/schemas.js';
import { EventEmitter } from 'node:events';
import { WatchwordApiError, WatchwordClient } from './client.js';
import { type Failure, WELL_FORMED_SECRET, failureOf, milliseconds, reasonOf } from './failures.js';
import { TokenWatch, type WatchNews } from './token-watch.js';
import { DecisionReports } from './decision-reports.js';
import { hostname } from 'node:os';
import type {
  AuthorizerDownEvent,
  AuthorizerOptions,
  AuthorizerStats,
  AuthorizerUpEvent,
  CheckPlace,
  DownPolicy,
} from './authorizer-types.js';

export type { AuthorizerDownEvent, AuthorizerOptions, AuthorizerStats, AuthorizerUpEvent, CheckPlace, DownPolicy };

/** First look-ups of new secrets in flight at once; past it, a new secret is denied without asking. */
const MAX_LOADING = 1_000;
/** Secrets remembered as unknown, at most (and never more than maxTokens). */
const MAX_NEGATIVE = 1_000;

/** One cached token. */
interface Entry {
  readonly secret: string;
  /** Its number on the watch. */
  readonly id: number;
  authorizer?: CompiledAuthorizer;
  hash?: string;
  /** Token expiry, ms since the epoch (Infinity: none). */
  expiresAt: number;
  /** When the daemon last confirmed this entry (ms since the epoch). */
  confirmedAt: number;
  usedAt: number;
  /** Denied without rules since this time: unknown to the daemon (deleted, expired, never made), or not resolvable now. */
  goneAt?: number;
  /** The first resolution, while it runs. */
  loading?: Promise<void>;
  /** Stops requests for this entry (it was dropped, or the Authorizer closed). */
  readonly stop: AbortController;
  /** The watch frame that added it (its acknowledgement and every beat after confirm the entry); undefined: not on the watch. */
  sentSeq?: number;
  /** A re-read while the watch has not confirmed it for a TTL, while it runs. */
  attempt?: Promise<void>;
  /** Why the last request for this token failed (cleared by an answer). */
  failing?: Failure;
  /** Seconds the daemon asked us to wait (a 429's Retry-After). */
  retryAfter?: number;
  /** Re-reads that failed in a row, and when the next may be tried (back-off). */
  failures: number;
  retryAt: number;
}

/**
 * Judges other callers' tokens in-process (README, "Enforcing policies in your service"), for services that enforce the policies
 * stored in watchword. A secret is resolved once (its token, links and policies in one call),
 * compiled with the daemon's own rules engine, and kept fresh over one watch of every cached
 * token (a WebSocket, `token-watch.ts`), so a deleted or changed token is seen as soon as the
 * daemon has it, whatever the number of tokens. A token the watch has not confirmed for a TTL
 * (no connection, an older daemon) is read again when next asked about. Cached answers are
 * synchronous: `allowed()` returns a boolean for a known secret and a promise only while one is
 * resolved. At most `maxConnections` HTTP connections (default 1) and the watch are open at once.
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
  /** One client per address; `preferred` is asked first. */
  private readonly clients: WatchwordClient[];
  private preferred = 0;
  /** Since when no server could be reached (undefined: one answers). */
  private downSince: number | undefined;
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
  /** Parsed rules by their text: shared by every token with the same policy. */
  private readonly parsed = new Map<string, ScopeRules>();
  private closed = false;
  /** Cached tokens by their number on the watch. */
  private readonly byId = new Map<number, Entry>();
  private nextId = 1;
  /** The one connection that keeps every cached token current; opened with the first token. */
  private watch: TokenWatch | undefined;
  /** The last addition the watch acknowledged, and when it last spoke (every token added by then is current as of it). */
  private watchAck = -1;
  private watchSaidAt = 0;
  /** Reports uses to the daemon and forgets idle tokens. */
  private sweeper: NodeJS.Timeout | undefined;
  private lastReport = 0;
  /** Denials and a sample of allows, told to the daemon once a second over the watch (decision-reports.ts); undefined: not told. */
  private readonly reports: DecisionReports | undefined;
  private reporter: NodeJS.Timeout | undefined;

  constructor(options: AuthorizerOptions = {}) {
    super();
    const timeoutMs = options.requestTimeoutMs ?? 5_000;
    // No default token and no environment: a caller without a secret is anonymous, never us.
    const own = { timeoutMs, token: null, maxConnections: options.maxConnections ?? 1 };
    const client =
      options.client instanceof WatchwordClient ? options.client.with(own) : new WatchwordClient({ ...options.client, ...own });
    if (options.addresses !== undefined) {
      if (
        !Array.isArray(options.addresses) ||
        options.addresses.length === 0 ||
        !options.addresses.every((a) => typeof a === 'string' && a.trim() !== '')
      ) {
        throw new TypeError('addresses: expected a non-empty array of server addresses');
      }
      this.clients = options.addresses.map((address) => client.with({ address }));
    } else {
      this.clients = [client];
    }
    this.ttl = milliseconds(options.tokenTTL, 30_000);
    if (!(this.ttl >= 100 && this.ttl <= 24 * 3_600_000)) throw new TypeError('tokenTTL must be between 100 ms and 24 h');
    this.down = options.downPolicy ?? 'extend-cache';
    if (!['extend-cache', 'async-cache', 'deny', 'allow'].includes(this.down))
      throw new TypeError(`downPolicy: one of extend-cache, async-cache, deny, allow; got ${JSON.stringify(this.down)}`);
    this.maxTokens = options.maxTokens ?? 10_000;
    this.maxNegative = Math.min(this.maxTokens, MAX_NEGATIVE);
    this.negativeTTL = options.negativeTTL ?? 1_000;
    if (options.name !== undefined && (typeof options.name !== 'string' || options.name === '' || options.name.length > 128))
      throw new TypeError('name: expected a string of 1 to 128 characters');
    if (options.reportDecisions !== false) this.reports = new DecisionReports(options.name ?? `${hostname()}:${process.pid}`);
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
        if (now >= entry.expiresAt || now - this.confirmed(entry) < this.ttl) {
          this.counters.hits++;
          return now < entry.expiresAt && this.judge(entry, resource, segment, access, place);
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
      down: this.downSince !== undefined,
      address: (this.clients[this.preferred] as WatchwordClient).address,
      reports: this.reports?.stats.reports ?? 0,
      reportsDropped: this.reports?.stats.dropped ?? 0,
    };
  }

  /** Stops the watch; later questions about unknown secrets get the down policy's answer. */
  close(): void {
    this.closed = true;
    this.reportNow();
    this.watch?.close();
    clearInterval(this.sweeper);
    clearInterval(this.reporter);
    for (const e of this.entries.values()) e.stop.abort();
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
    if (entry.authorizer !== undefined) return Date.now() < entry.expiresAt && this.judge(entry, resource, segment, access, place);
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
      if (Date.now() >= entry.expiresAt) return false;
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
    if (Date.now() < entry.retryAt || entry.stop.signal.aborted) return undefined;
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
    const entry: Entry = {
      secret,
      id: this.nextId++,
      expiresAt: Number.POSITIVE_INFINITY,
      confirmedAt: 0,
      usedAt: now,
      stop: new AbortController(),
      failures: 0,
      retryAt: 0,
    };
    this.entries.set(secret, entry);
    this.loadingCount++;
    entry.loading = this.fetch(entry).then(
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
          if (this.entries.get(secret) === entry) this.entries.delete(secret);
        } else {
          // Rate-limited or not understood: denied, and not asked again for a moment.
          entry.goneAt = Date.now();
          this.markGone(entry);
        }
      },
    );
    return entry;
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
    entry.stop.abort();
    if (this.entries.get(entry.secret) === entry) this.entries.delete(entry.secret);
    if (this.byId.get(entry.id) !== entry) return;
    this.byId.delete(entry.id);
    if (entry.sentSeq !== undefined) this.watch?.remove([entry.id]);
    entry.sentSeq = undefined;
  }

  /**
   * One request for the token's rules. A 403 marks the token gone; any other failure throws,
   * with its kind in `entry.failing`.
   */
  private async fetch(entry: Entry): Promise<void> {
    try {
      const r = await this.ask(entry.stop.signal, (client) =>
        client.acl.tokenAuthorizer({ token: entry.secret, signal: entry.stop.signal }),
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
      if (entry.stop.signal.aborted) throw err;
      if (err instanceof WatchwordApiError && err.status === 403) {
        // The daemon's word: this secret is unknown (deleted, expired or never made).
        entry.authorizer = undefined;
        entry.hash = undefined;
        entry.goneAt = Date.now();
        entry.failing = undefined;
        entry.stop.abort();
        return;
      }
      entry.failing = failureOf(err);
      entry.retryAfter = err instanceof WatchwordApiError ? err.retryAfter : undefined;
      throw err;
    }
  }

  /**
   * One request, to the preferred server and, while servers cannot be reached, to each of the
   * others in turn; the one that answers (even with an error: it is up) is preferred from then on.
   * Tells `'down'` when none can be reached and `'up'` when one answers again.
   */
  private async ask<T>(stop: AbortSignal, request: (client: WatchwordClient) => Promise<T>): Promise<T> {
    const first = this.preferred;
    let last: unknown;
    for (let i = 0; i < this.clients.length; i++) {
      const at = (first + i) % this.clients.length;
      try {
        const answer = await request(this.clients[at] as WatchwordClient);
        this.answeredBy(at);
        return answer;
      } catch (err) {
        if (stop.aborted) throw err;
        if (failureOf(err) !== 'unreachable') {
          if (err instanceof WatchwordApiError) this.answeredBy(at);
          throw err;
        }
        last = err;
        if (i + 1 < this.clients.length) this.counters.failovers++;
      }
    }
    if (this.downSince === undefined) {
      this.downSince = Date.now();
      this.emit('down', { since: this.downSince, reason: reasonOf(last), downPolicy: this.down });
    }
    throw last;
  }

  private answeredBy(at: number): void {
    this.preferred = at;
    if (this.downSince === undefined) return;
    const downForMs = Date.now() - this.downSince;
    this.downSince = undefined;
    this.emit('up', { downForMs, address: (this.clients[at] as WatchwordClient).address });
  }

  private install(entry: Entry, view: TokenAuthorizerView, hash: string | undefined): void {
    const policies: ApplicablePolicy[] = view.Policies.map((p) => ({
      rules: this.rules(p.Rules),
      namespace: p.Namespace,
      partition: p.Partition,
      builtin: p.Builtin,
    }));
    entry.authorizer = new CompiledAuthorizer(view.Namespace, view.Partition, policies, view.DefaultPolicy);
    const expires = view.ExpirationTime ? Date.parse(view.ExpirationTime) : Number.POSITIVE_INFINITY;
    // An expiry that cannot be read is taken as already passed.
    entry.expiresAt = Number.isNaN(expires) ? 0 : expires;
    entry.hash = hash;
  }

  private rules(text: string): ScopeRules {
    let rules = this.parsed.get(text);
    if (rules === undefined) {
      try {
        rules = parsePolicyRules(text);
      } catch {
        rules = { flags: {}, resources: [], namespaces: [], partitions: [] };
      }
      if (this.parsed.size >= 10_000) this.parsed.clear();
      this.parsed.set(text, rules);
    }
    return rules;
  }

  /** A resolved token joins the watch (opened with the first one). */
  private watched(entry: Entry): void {
    this.byId.set(entry.id, entry);
    if (this.watch === undefined) {
      this.watch = new TokenWatch({
        clients: this.clients,
        // Beats well inside the TTL, so a token stays confirmed through a lost beat or two.
        beatMs: Math.min(10_000, Math.max(50, Math.floor(this.ttl / 3))),
        onOpen: () => {
          for (const e of this.byId.values()) e.sentSeq = this.watch?.add(e.id, e.secret, e.hash ?? '');
        },
        onNews: (news) => this.news(news),
        onLost: () => {
          this.watchAck = -1;
          this.watchSaidAt = 0;
          for (const e of this.byId.values()) e.sentSeq = undefined;
        },
      });
      // Uses reach the daemon well within its flush (a minute by default) without a report per question.
      const every = Math.min(30_000, Math.max(1_000, this.ttl));
      this.sweeper = setInterval(() => this.sweep(), every);
      this.sweeper.unref();
      if (this.reports !== undefined) {
        this.reporter = setInterval(() => this.reportNow(), 1_000);
        this.reporter.unref();
      }
    }
    entry.sentSeq = this.watch.add(entry.id, entry.secret, entry.hash ?? '');
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
        const parsed = tokenAuthorizerResponse.safeParse(view);
        // A view that cannot be read is not installed: the entry goes stale and is read again.
        if (entry === undefined || !parsed.success) continue;
        this.install(entry, parsed.data, hash);
        entry.confirmedAt = now;
        this.counters.refreshes++;
      }
      for (const id of news.gone) {
        const entry = typeof id === 'number' ? this.byId.get(id) : undefined;
        if (entry === undefined) continue;
        entry.authorizer = undefined;
        entry.goneAt = now;
        this.markGone(entry);
      }
    }
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
