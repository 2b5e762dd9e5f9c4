/**
 * The decisions seen in the last hour (SPEC §22, "What a change would break"): which checks
 * each token was asked about, at this server and as enforcing clients report them, so a dry
 * run of a policy or role change can judge them again before and after. Kept in four buckets
 * of a quarter of an hour each (what was seen within the last hour, give or take a quarter);
 * bounded: past `maxEntries` pairs of token and check a bucket counts what it drops.
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
const BUCKET_MS = 15 * 60_000;
const MAX_CHECK_KINDS = 100_000;

interface Bucket {
  start: number;
  /** AccessorID -> the keys of the checks asked for it. */
  byToken: Map<string, Set<string>>;
  /** AccessorID -> the request bodies (with their place) already noted for it: a repeated request costs one look-up. */
  bodies: Map<string, Set<string>>;
  entries: number;
  dropped: number;
}

/** Distinct request bodies remembered per token and bucket (a service asks the same few over and over). */
const MAX_BODIES_PER_TOKEN = 64;

const SEP = '\u0000';

export class RecentChecks {
  private buckets: Bucket[] = [];
  /** Check key -> the check (shared by every token that asked it). */
  private readonly checks = new Map<string, RecordedCheck>();
  private droppedKinds = 0;

  constructor(
    private readonly now: () => number = Date.now,
    private readonly maxEntries = 500_000,
  ) {}

  private current(): Bucket {
    const now = this.now();
    let b = this.buckets[this.buckets.length - 1];
    if (b === undefined || now - b.start >= BUCKET_MS) {
      b = { start: now, byToken: new Map(), bodies: new Map(), entries: 0, dropped: 0 };
      this.buckets.push(b);
      if (this.buckets.length > BUCKETS) this.buckets.shift();
    }
    return b;
  }

  /**
   * Whether this token's request (its body and place, as `text`) was noted in this quarter hour
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

  /** Notes that `accessor` was asked this check (judged at this place). */
  record(accessor: string, resource: string, segment: string | undefined, access: string, partition: string, namespace: string): void {
    const key = `${resource}${SEP}${segment ?? ''}${SEP}${access}${SEP}${partition}${SEP}${namespace}${segment === undefined ? SEP : ''}`;
    const b = this.current();
    let set = b.byToken.get(accessor);
    if (set?.has(key)) return;
    if (b.entries >= this.maxEntries) {
      b.dropped++;
      return;
    }
    if (!this.checks.has(key)) {
      if (this.checks.size >= MAX_CHECK_KINDS) {
        this.droppedKinds++;
        return;
      }
      this.checks.set(key, {
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
  }

  /** Every token with a check seen within the last hour, with those checks (each once). */
  *seen(): IterableIterator<[string, RecordedCheck[]]> {
    const since = this.now() - BUCKETS * BUCKET_MS;
    const merged = new Map<string, Set<string>>();
    for (const b of this.buckets) {
      if (b.start + BUCKET_MS < since) continue;
      for (const [accessor, keys] of b.byToken) {
        let set = merged.get(accessor);
        if (set === undefined) merged.set(accessor, (set = new Set()));
        for (const k of keys) set.add(k);
      }
    }
    for (const [accessor, keys] of merged) yield [accessor, [...keys].map((k) => this.checks.get(k) as RecordedCheck)];
  }

  /** What was not kept: pairs past a bucket's bound, and checks past the bound of distinct ones. */
  get dropped(): number {
    return this.buckets.reduce((n, b) => n + b.dropped, 0) + this.droppedKinds;
  }
}
