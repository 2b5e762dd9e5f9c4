import { createHash } from 'node:crypto';
import { ANONYMOUS_TOKEN_ID } from '../domain/ids.js';

/**
 * The decisions seen in the last hour, or the window recent_checks_window sets (docs/operator-insight.md, "What a
 * change would break"): which checks each token was asked about, at this server and as enforcing clients report
 * them, so a dry run of a policy or role change can judge them again before and after. Kept in four buckets of a
 * quarter of the window each (what was seen within the window, give or take a quarter); every
 * bucket holds its own checks, so whatever filled one is gone with it.
 *
 * Bounded so that no one caller can blind the record for everyone else: each token may add only
 * so many checks to a bucket (the anonymous token, which anyone can speak for, few), each
 * enforcing client's reports only so many, a bucket only so many pairs of token and check and
 * so many bytes of checks; what does not fit is counted (`dropped`). A segment longer than
 * LONG_SEGMENT is known by its hash in the keys.
 *
 * On the hottest path (every decision): a record is one map look-up by token, one string made
 * of the check and one set insert.
 */

/** A check as recorded: what was asked, where it was judged. */
export interface RecordedCheck {
  Resource: string;
  Segment?: string;
  Access: string;
  Namespace: string;
  Partition: string;
}

const BUCKETS = 4;

/** Checks one token may add to a bucket, and the anonymous token (anyone's to use). */
const PER_TOKEN = 1_000;
const PER_ANONYMOUS = 64;
/** Checks one enforcing client's reports (one watch credential) may add to a bucket. */
const PER_REPORTER = 100_000;
/** Bytes of distinct checks one bucket keeps. */
const KIND_BYTES = 32 << 20;
/** Segments longer than this are keyed by their hash. */
const LONG_SEGMENT = 256;
/** What a kept check costs besides its text (the object, the map entries). */
const KIND_OVERHEAD = 160;

interface Bucket {
  start: number;
  /** AccessorID -> the keys of the checks asked for it. */
  byToken: Map<string, Set<string>>;
  /** The checks this bucket holds by key (shared by every token that asked it). */
  kinds: Map<string, RecordedCheck>;
  kindBytes: number;
  /** Checks each reporter added. */
  byReporter: Map<string, number>;
  /** AccessorID -> the request bodies (with their place) already noted for it: a repeated request costs one look-up. */
  bodies: Map<string, Set<string>>;
  entries: number;
  dropped: number;
}

/** Distinct request bodies remembered per token and bucket (a service asks the same few over and over). */
const MAX_BODIES_PER_TOKEN = 64;

const SEP = '\u0000';

function keyOf(resource: string, segment: string | undefined, access: string, partition: string, namespace: string): string {
  const s =
    segment === undefined ? '' : segment.length <= LONG_SEGMENT ? segment : `#${createHash('sha256').update(segment).digest('base64')}`;
  return `${resource}${SEP}${s}${SEP}${access}${SEP}${partition}${SEP}${namespace}${segment === undefined ? SEP : ''}`;
}

export class RecentChecks {
  private buckets: Bucket[] = [];
  /** A bucket's span: a quarter of the window (an hour by default, recent_checks_window). */
  private readonly bucketMs: number;

  constructor(
    private readonly now: () => number = Date.now,
    windowMs = 3_600_000,
    private readonly maxEntries = 500_000,
  ) {
    this.bucketMs = windowMs / BUCKETS;
  }

  private current(): Bucket {
    const now = this.now();
    let b = this.buckets[this.buckets.length - 1];
    if (b === undefined || now - b.start >= this.bucketMs) {
      b = {
        start: now,
        byToken: new Map(),
        kinds: new Map(),
        kindBytes: 0,
        byReporter: new Map(),
        bodies: new Map(),
        entries: 0,
        dropped: 0,
      };
      this.buckets.push(b);
      if (this.buckets.length > BUCKETS) this.buckets.shift();
    }
    return b;
  }

  /**
   * Whether this token's request (its body and place, as `text`) was noted in this bucket
   * already; if not, it is remembered as noted (the caller then notes its checks). What a
   * service asks over and over costs one look-up per request, not a record per check.
   */
  seenRequest(accessor: string, text: string): boolean {
    const b = this.current();
    let set = b.bodies.get(accessor);
    if (set?.has(text)) return true;
    if (set === undefined) b.bodies.set(accessor, (set = new Set()));
    if (set.size < MAX_BODIES_PER_TOKEN) set.add(text);
    return false;
  }

  /**
   * Notes that `accessor` was asked this check (judged at this place); `reporter` names the
   * enforcing client that told of it (undefined: asked here).
   */
  record(
    accessor: string,
    resource: string,
    segment: string | undefined,
    access: string,
    partition: string,
    namespace: string,
    reporter?: string,
  ): void {
    const key = keyOf(resource, segment, access, partition, namespace);
    const b = this.current();
    let set = b.byToken.get(accessor);
    if (set?.has(key)) return;
    const reported = reporter === undefined ? 0 : (b.byReporter.get(reporter) ?? 0);
    if (
      b.entries >= this.maxEntries ||
      (set?.size ?? 0) >= (accessor === ANONYMOUS_TOKEN_ID ? PER_ANONYMOUS : PER_TOKEN) ||
      reported >= PER_REPORTER
    ) {
      b.dropped++;
      return;
    }
    if (!b.kinds.has(key)) {
      const bytes = KIND_OVERHEAD + 2 * (key.length + (segment?.length ?? 0));
      if (b.kindBytes + bytes > KIND_BYTES) {
        b.dropped++;
        return;
      }
      b.kindBytes += bytes;
      b.kinds.set(key, {
        Resource: resource,
        ...(segment !== undefined ? { Segment: segment } : {}),
        Access: access,
        Namespace: namespace,
        Partition: partition,
      });
    }
    if (set === undefined) b.byToken.set(accessor, (set = new Set()));
    set.add(key);
    b.entries++;
    if (reporter !== undefined) b.byReporter.set(reporter, reported + 1);
  }

  /** Every token with a check seen within the window, with those checks (each once). */
  *seen(): IterableIterator<[string, RecordedCheck[]]> {
    const since = this.now() - BUCKETS * this.bucketMs;
    const merged = new Map<string, Map<string, RecordedCheck>>();
    for (const b of this.buckets) {
      if (b.start + this.bucketMs < since) continue;
      for (const [accessor, keys] of b.byToken) {
        let checks = merged.get(accessor);
        if (checks === undefined) merged.set(accessor, (checks = new Map()));
        for (const k of keys) if (!checks.has(k)) checks.set(k, b.kinds.get(k) as RecordedCheck);
      }
    }
    for (const [accessor, checks] of merged) yield [accessor, [...checks.values()]];
  }

  /** What was not kept within the window: checks past a bucket's bounds or a token's or reporter's share. */
  get dropped(): number {
    return this.buckets.reduce((n, b) => n + b.dropped, 0);
  }
}
