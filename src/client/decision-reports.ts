/**
 * What an enforcing client tells its daemon of the decisions it made (docs/operator-insight.md, "Denials seen by
 * enforcing clients"): every denial, and a sample of its allows (what a dry run judges again), in
 * a batch at most once a second of at most MAX_BATCH entries, over the watch it already holds
 * (the daemon knows each watched token by the number the client gave it, so a report names no
 * secret and can only speak of tokens the client holds). Past the bounds, or while the daemon
 * is away, entries are dropped and counted; noting one never waits on anything.
 */

/** Entries in one report. */
export const MAX_BATCH = 1_000;
/** One allow in this many is looked at for the sample (each distinct check of a token then once per window). */
const ALLOW_SAMPLE = 16;
/** The window within which an allowed check of a token is reported once. */
const ALLOW_WINDOW_MS = 15 * 60_000;
/** Distinct allowed checks remembered per window. */
const MAX_ALLOWS_SEEN = 50_000;

/** [watch id, resource, segment (null: none), access, partition, namespace] */
type Asked = [number, string, string | null, string, string, string];

export interface ReportStats {
  /** Reports sent. */
  reports: number;
  /** Entries not reported: past a batch's bound, or the daemon away when it was due. */
  dropped: number;
}

/** A denial noted: what was asked, and how many times since the last report. */
type Denial = [...Asked, number];

/**
 * Denials by watch id, segment, resource and access, then place: maps of the caller's own
 * strings, so noting a denial asked before makes no string (the hot path of a denied flood).
 */
type DenialIndex = Map<number, Map<string, Map<string, Map<string, Denial[]>>>>;

export class DecisionReports {
  private denied: DenialIndex = new Map();
  private deniedCount = 0;
  private allowed: Asked[] = [];
  private allowsSeen = new Set<string>();
  private windowStart: number;
  private sample = 0;
  private unknown = 0;
  /** Dropped since the last report (told in the next one), and in all. */
  private droppedSince = 0;
  readonly stats: ReportStats = { reports: 0, dropped: 0 };

  constructor(
    /** The client's name in the daemon's audit log. */
    readonly name: string,
    private readonly now: () => number = Date.now,
  ) {
    this.windowStart = now();
  }

  /** A decision about a watched token (`id` its number on the watch). */
  note(id: number, resource: string, segment: string, access: string, partition: string, namespace: string, allowed: boolean): void {
    if (allowed) {
      if (++this.sample % ALLOW_SAMPLE !== 0) return;
      const key = `${id}\u0000${resource}\u0000${segment}\u0000${access}\u0000${partition}\u0000${namespace}`;
      if (this.allowsSeen.has(key)) return;
      if (this.allowsSeen.size >= MAX_ALLOWS_SEEN) return;
      this.allowsSeen.add(key);
      if (this.allowed.length + this.deniedCount >= MAX_BATCH) return this.drop();
      this.allowed.push([id, resource, segment === '' ? null : segment, access, partition, namespace]);
      return;
    }
    let bySegment = this.denied.get(id);
    if (bySegment === undefined) this.denied.set(id, (bySegment = new Map()));
    let byResource = bySegment.get(segment);
    if (byResource === undefined) bySegment.set(segment, (byResource = new Map()));
    let byAccess = byResource.get(resource);
    if (byAccess === undefined) byResource.set(resource, (byAccess = new Map()));
    let places = byAccess.get(access);
    if (places === undefined) byAccess.set(access, (places = []));
    for (const d of places) {
      if (d[4] === partition && d[5] === namespace) {
        d[6]++;
        return;
      }
    }
    if (this.deniedCount >= MAX_BATCH) return this.drop();
    places.push([id, resource, segment === '' ? null : segment, access, partition, namespace, 1]);
    this.deniedCount++;
  }

  /** A secret denied without a token to name (unknown, deleted, malformed): counted. */
  noteUnknown(): void {
    this.unknown++;
  }

  private drop(): void {
    this.droppedSince++;
    this.stats.dropped++;
  }

  /**
   * The batch due now, handed to `send` (false: the daemon is away, and the batch is dropped and
   * counted). Called once a second.
   */
  flush(send: (frame: object) => boolean): void {
    const now = this.now();
    if (now - this.windowStart >= ALLOW_WINDOW_MS) {
      this.windowStart = now;
      this.allowsSeen.clear();
    }
    if (this.deniedCount === 0 && this.allowed.length === 0 && this.unknown === 0 && this.droppedSince === 0) return;
    const denied: Denial[] = [];
    for (const bySegment of this.denied.values())
      for (const byResource of bySegment.values())
        for (const byAccess of byResource.values()) for (const places of byAccess.values()) denied.push(...places);
    const allowed = this.allowed.slice(0, MAX_BATCH - denied.length);
    const frame = { client: this.name, denied, allowed, unknown: this.unknown, dropped: this.droppedSince };
    const entries = denied.length + allowed.length;
    this.denied = new Map();
    this.deniedCount = 0;
    this.allowed = [];
    this.unknown = 0;
    this.droppedSince = 0;
    if (send(frame)) this.stats.reports++;
    else {
      this.droppedSince += entries;
      this.stats.dropped += entries;
    }
  }
}
