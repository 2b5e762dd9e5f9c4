import { type ApplicablePolicy, Authorizer as CompiledAuthorizer } from '../domain/rules/authorizer.js';
import { type Access, RESOURCES } from '../domain/rules/decisions.js';
import { type ScopeRules, parsePolicyRules } from '../domain/rules/policy.js';
import type { TokenAuthorizerResponse } from '../api/schemas.js';
import { type ClientOptions, WatchwordApiError, WatchwordClient } from './index.js';

/**
 * What to answer when the daemon cannot be reached (Consul's `acl.down_policy`):
 * - `extend-cache` (default): cached tokens keep their last known rules past the TTL; others are denied.
 * - `async-cache`: the same, and a stale token is answered at once from the cache while it is refreshed.
 * - `deny`: everything is denied until the daemon answers again.
 * - `allow`: everything is allowed until the daemon answers again.
 */
export type DownPolicy = 'extend-cache' | 'async-cache' | 'deny' | 'allow';

export interface AuthorizerOptions {
  /** The daemon to ask (a client, or the options of one). Its own token is never used. */
  client?: WatchwordClient | ClientOptions;
  /** How long the daemon's word on a token holds without being confirmed (ms or a Go duration; default 30 s). */
  tokenTTL?: number | string;
  /** When the daemon cannot be reached (default `extend-cache`). */
  downPolicy?: DownPolicy;
  /** Tokens kept at once; the least recently used goes first (default 10,000). */
  maxTokens?: number;
  /** How long an unknown secret is remembered as unknown (default 1 s). */
  negativeTTL?: number;
  /** One request's time limit before the daemon counts as unreachable (default 5 s). */
  requestTimeoutMs?: number;
}

/** Where a check is judged; by default where the token lives. */
export interface CheckPlace {
  namespace?: string;
  partition?: string;
}

/** One cached token. */
interface Entry {
  readonly secret: string;
  authorizer?: CompiledAuthorizer;
  hash?: string;
  /** Token expiry, ms since the epoch (Infinity: none). */
  expiresAt: number;
  /** When the daemon last confirmed this entry (ms since the epoch). */
  confirmedAt: number;
  usedAt: number;
  /** Unknown to the daemon (deleted, expired, never existed) since this time. */
  goneAt?: number;
  /** The first resolution, while it runs. */
  loading?: Promise<void>;
  /** Stops the watch of this entry. */
  readonly stop: AbortController;
  /** Wakes the watch out of its back-off to try at once (an expired entry is being asked about). */
  kick?: () => void;
  /** Settles when the watch's next attempt does. */
  attempt?: Promise<void>;
  failing: boolean;
}

function milliseconds(value: number | string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value === 'number') return value;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(value.trim());
  if (!m) throw new TypeError(`tokenTTL: expected milliseconds or a duration like "30s", got ${JSON.stringify(value)}`);
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms'];
}

function isUnreachable(err: unknown): boolean {
  // 403 is the daemon's answer (the token is unknown); 5xx and 429 mean it cannot answer now.
  return !(err instanceof WatchwordApiError) || err.status >= 500 || err.status === 429;
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });

/**
 * Judges other callers' tokens in-process (SPEC §17), for services that enforce the policies
 * stored in watchword. A secret is resolved once (its token, links and policies in one call),
 * compiled with the daemon's own rules engine, and kept fresh by a blocking query on it, so a
 * deleted or changed token is seen within about a second. Cached answers are synchronous:
 * `allowed()` returns a boolean for a known secret and a promise only while one is resolved.
 *
 * ```ts
 * const authz = new Authorizer({ client: { address: 'http://127.0.0.1:8500' } });
 * if (!(await authz.allowed(secret, 'service', 'web', 'write'))) reply.code(403);
 * ```
 */
export class Authorizer {
  private readonly client: WatchwordClient;
  private readonly ttl: number;
  private readonly down: DownPolicy;
  private readonly maxTokens: number;
  private readonly negativeTTL: number;
  private readonly entries = new Map<string, Entry>();
  /** Parsed rules by their text: shared by every token with the same policy. */
  private readonly parsed = new Map<string, ScopeRules>();
  private closed = false;

  constructor(options: AuthorizerOptions = {}) {
    const timeoutMs = options.requestTimeoutMs ?? 5_000;
    this.client = options.client instanceof WatchwordClient ? options.client.with({ timeoutMs }) : new WatchwordClient({ ...options.client, timeoutMs });
    this.ttl = milliseconds(options.tokenTTL, 30_000);
    if (!(this.ttl >= 100)) throw new TypeError('tokenTTL must be at least 100 ms');
    this.down = options.downPolicy ?? 'extend-cache';
    if (!['extend-cache', 'async-cache', 'deny', 'allow'].includes(this.down)) throw new TypeError(`downPolicy: one of extend-cache, async-cache, deny, allow; got ${JSON.stringify(this.down)}`);
    this.maxTokens = options.maxTokens ?? 10_000;
    this.negativeTTL = options.negativeTTL ?? 1_000;
  }

  /**
   * May the token with this secret (`''`: anonymous) have `access` to `resource` `segment`?
   * A boolean when the token is cached, else a promise (await works on both). Unknown,
   * deleted and expired tokens are denied; an unknown resource or access throws.
   */
  allowed(secret: string, resource: string, segment: string, access: Access, place?: CheckPlace): boolean | Promise<boolean> {
    const spec = Object.hasOwn(RESOURCES, resource) ? RESOURCES[resource] : undefined;
    if (spec === undefined || !spec.accesses.includes(access)) throw new TypeError(`unknown resource or access: ${resource} ${access}`);
    const now = Date.now();
    const entry = this.entries.get(secret);
    if (entry !== undefined) {
      entry.usedAt = now;
      if (entry.authorizer !== undefined) {
        if (now >= entry.expiresAt) return false;
        if (now - entry.confirmedAt < this.ttl) return this.judge(entry, resource, segment, access, place);
        return this.stale(entry, resource, segment, access, place);
      }
      if (entry.goneAt !== undefined && now - entry.goneAt < this.negativeTTL) return false;
      if (entry.loading !== undefined) return entry.loading.then(() => this.afterLoad(entry, resource, segment, access, place));
      this.entries.delete(secret);
    }
    if (this.closed) return this.down === 'allow';
    const fresh = this.add(secret, now);
    return (fresh.loading as Promise<void>).then(() => this.afterLoad(fresh, resource, segment, access, place));
  }

  /** Tokens cached right now. */
  get size(): number {
    return this.entries.size;
  }

  /** Stops every watch; later questions about unknown secrets get the down policy's answer. */
  close(): void {
    this.closed = true;
    for (const e of this.entries.values()) e.stop.abort();
    this.entries.clear();
  }

  private judge(entry: Entry, resource: string, segment: string, access: Access, place: CheckPlace | undefined): boolean {
    const a = entry.authorizer as CompiledAuthorizer;
    return a.allows(resource, segment, access, place?.partition || a.tokenPartition, place?.namespace || a.tokenNamespace);
  }

  private afterLoad(entry: Entry, resource: string, segment: string, access: Access, place: CheckPlace | undefined): boolean {
    if (entry.authorizer !== undefined) return Date.now() < entry.expiresAt && this.judge(entry, resource, segment, access, place);
    if (entry.goneAt !== undefined) return false;
    // Never resolved: the daemon could not be reached. Nothing cached to extend.
    return this.down === 'allow';
  }

  /** The daemon has not confirmed this token for a TTL: its watch is failing. */
  private stale(entry: Entry, resource: string, segment: string, access: Access, place: CheckPlace | undefined): boolean | Promise<boolean> {
    if (this.down === 'async-cache') {
      entry.kick?.();
      return this.judge(entry, resource, segment, access, place);
    }
    entry.kick?.();
    const decide = (): boolean => {
      if (entry.authorizer === undefined) return entry.goneAt === undefined && this.down === 'allow';
      if (Date.now() >= entry.expiresAt) return false;
      if (!entry.failing) return this.judge(entry, resource, segment, access, place);
      if (this.down === 'allow') return true;
      if (this.down === 'deny') return false;
      return this.judge(entry, resource, segment, access, place);
    };
    return entry.attempt ? entry.attempt.then(decide) : decide();
  }

  private add(secret: string, now: number): Entry {
    if (this.entries.size >= this.maxTokens) this.evictOne();
    const entry: Entry = { secret, expiresAt: Number.POSITIVE_INFINITY, confirmedAt: 0, usedAt: now, stop: new AbortController(), failing: false };
    this.entries.set(secret, entry);
    entry.loading = this.fetch(entry, undefined).then(
      () => {
        entry.loading = undefined;
        if (entry.authorizer !== undefined) void this.watch(entry);
      },
      () => {
        entry.loading = undefined;
        if (this.entries.get(secret) === entry && entry.goneAt === undefined) this.entries.delete(secret);
      },
    );
    return entry;
  }

  /** Drops the least recently used token. */
  private evictOne(): void {
    let oldest: Entry | undefined;
    for (const e of this.entries.values()) if (oldest === undefined || e.usedAt < oldest.usedAt) oldest = e;
    if (oldest !== undefined) this.forget(oldest);
  }

  private forget(entry: Entry): void {
    entry.stop.abort();
    if (this.entries.get(entry.secret) === entry) this.entries.delete(entry.secret);
  }

  /**
   * One request for the token's rules: with `hash`, a blocking one that answers when they
   * change or after half a TTL. A 403 marks the token gone; an unreachable daemon throws.
   */
  private async fetch(entry: Entry, hash: string | undefined): Promise<void> {
    const wait = Math.max(50, Math.floor(this.ttl / 2));
    const signal = hash === undefined ? entry.stop.signal : AbortSignal.any([entry.stop.signal, AbortSignal.timeout(wait + wait / 16 + 5_000)]);
    try {
      const r = await this.client.acl.tokenAuthorizer({
        token: entry.secret,
        signal,
        ...(hash !== undefined ? { hash, wait: `${wait}ms` } : {}),
      });
      entry.confirmedAt = Date.now();
      entry.failing = false;
      if (r.contentHash === undefined || r.contentHash !== entry.hash || entry.authorizer === undefined) this.install(entry, r.value, r.contentHash);
    } catch (err) {
      if (entry.stop.signal.aborted) throw err;
      if (isUnreachable(err)) {
        entry.failing = true;
        throw err;
      }
      // The daemon's word: this secret is unknown (deleted, expired or never made).
      entry.authorizer = undefined;
      entry.hash = undefined;
      entry.goneAt = Date.now();
      entry.failing = false;
      entry.stop.abort();
    }
  }

  private install(entry: Entry, view: TokenAuthorizerResponse, hash: string | undefined): void {
    const policies: ApplicablePolicy[] = view.Policies.map((p) => ({ rules: this.rules(p.Rules), namespace: p.Namespace, partition: p.Partition, builtin: p.Builtin }));
    entry.authorizer = new CompiledAuthorizer(view.Namespace, view.Partition, policies, view.DefaultPolicy);
    entry.expiresAt = view.ExpirationTime ? Date.parse(view.ExpirationTime) : Number.POSITIVE_INFINITY;
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

  /**
   * Keeps an entry fresh: blocking reads by content hash while the daemon answers, back-off
   * (250 ms doubling to 5 s) while it does not, a plain read as soon as it may be back. Ends
   * when the token is gone, unused for two TTLs (it is then forgotten), or on close.
   */
  private async watch(entry: Entry): Promise<void> {
    let failures = 0;
    const idleAfter = Math.max(2 * this.ttl, 10_000);
    while (!entry.stop.signal.aborted) {
      if (Date.now() - entry.usedAt > idleAfter) {
        this.forget(entry);
        return;
      }
      let settle: () => void = () => {};
      entry.attempt = new Promise<void>((resolve) => (settle = resolve));
      try {
        await this.fetch(entry, failures === 0 ? entry.hash : undefined);
        failures = 0;
      } catch {
        failures++;
      }
      settle();
      if (entry.goneAt !== undefined) return;
      if (failures > 0) {
        const wake = new AbortController();
        const onStop = (): void => wake.abort();
        entry.stop.signal.addEventListener('abort', onStop, { once: true });
        entry.kick = () => wake.abort();
        await sleep(Math.min(250 * 2 ** (failures - 1), 5_000), wake.signal);
        entry.kick = undefined;
        entry.stop.signal.removeEventListener('abort', onStop);
      }
    }
  }
}
