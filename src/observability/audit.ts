import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { WatchwordError } from '../domain/errors.js';
import { quoteJSON } from '../domain/json-text.js';
import type { AuditActor } from '../domain/types.js';
import type { AuditGroupEvent } from '../store/store.js';
import { AuditFile } from './audit-file.js';
import { LineRing } from './line-ring.js';
import { RefusalCounter } from './refusal-counter.js';
import type { AuditType } from '../domain/audit-types.js';
import {
  ANONYMOUS,
  type AuditEvent,
  type AuditFilter,
  type AuditMode,
  type AuditSettings,
  EVENT_KEYS,
  PATH_CHARS,
  RECENT,
  RECENT_BYTES,
  RECENT_REFUSALS,
  RECENT_REFUSAL_BYTES,
  REFUSAL_SUMMARIES,
  REFUSAL_WINDOW_MS,
  type RefusalSample,
  SEEN_TYPES,
  type SeenKind,
  type SeenType,
  changesPathOf,
  cut,
  isSeen,
  members,
  seenPathOf,
  summarize,
} from './audit-events.js';

/**
 * The audit log (docs/audit.md: Audit log): who changed what, when and from where, and who was
 * refused. One JSON line per event in `<data_dir>/audit/audit.log` (0600), rotated by size.
 * Writes ride their group commit (store/group-commit.ts): in `best-effort` mode their lines
 * are appended once the group is durable and a failure is logged and counted; in `enforced`
 * mode a group's lines are written and synced before the group itself, and a group whose lines
 * cannot be written is refused (503 AUDIT_UNAVAILABLE). Refusals and other events are
 * buffered and appended within a moment. Secrets never appear: callers are named by their
 * token's AccessorID, or for an unknown secret by an HMAC of it under this datacenter's key.
 */

export type { AuditActor } from '../domain/types.js';
export { systemActor, auditPath, REFUSED, changesPathOf, seenPathOf } from './audit-events.js';
export type { AuditMode, AuditEvent, AuditFilter, AuditSettings } from './audit-events.js';

export class AuditLog {
  private settings: AuditSettings;
  /** Every event (what was seen past a burst counted): `audit.log`. */
  private readonly all: AuditFile;
  /** Every event but what was seen: the record of changes no refusal can rotate away. */
  private readonly changes: AuditFile;
  /** Lines waiting to be appended to each file (best-effort events, what was seen). */
  private bufferedAll: string[] = [];
  private bufferedChanges: string[] = [];
  private flushTimer: NodeJS.Timeout | undefined;
  /** The last events kept in memory, numbered in this server's sequence (the ring's tags): changes, and each kind seen apart. */
  private readonly changeRing = new LineRing(RECENT, RECENT_BYTES);
  private readonly seen: Record<SeenType, SeenKind>;
  private sequence = 0;
  private readonly refusalWindow: NodeJS.Timeout;
  /** Until this datacenter's key is known (its first leader makes it): a key of this process. */
  private readonly fallbackKey: Buffer = randomBytes(32);
  /** Told whenever an event is recorded (follow mode). */
  private readonly listeners = new Set<() => void>();
  /** The members every line has after the actor's, up to the status. */
  private readonly placeMembers: string;

  constructor(
    settings: AuditSettings,
    private readonly place: { datacenter: string; server: string },
    private readonly logger: Logger,
    /** This datacenter's key for naming unknown secrets (undefined until its first leader made it). */
    private readonly keySource: () => Uint8Array | undefined = () => undefined,
    options: { refusalWindowMs?: number } = {},
  ) {
    this.settings = settings;
    this.placeMembers = `,"Datacenter":${JSON.stringify(place.datacenter)},"Server":${JSON.stringify(place.server)},"Status":`;
    const consequence = () => (this.settings.mode === 'enforced' ? '; writes are refused' : '');
    this.all = new AuditFile(settings, logger, consequence);
    this.changes = new AuditFile({ ...settings, path: changesPathOf(settings.path) }, logger, consequence);
    const seenKind = (type: SeenType): SeenKind => ({
      file: new AuditFile({ ...settings, path: seenPathOf(settings.path, type) }, logger, consequence),
      ring: new LineRing(RECENT_REFUSALS, RECENT_REFUSAL_BYTES),
      counter: new RefusalCounter<RefusalSample>(),
      buffered: [],
    });
    this.seen = { refused: seenKind('refused'), 'denied-by-client': seenKind('denied-by-client') };
    this.refusalWindow = setInterval(() => this.endRefusalWindow(), options.refusalWindowMs ?? REFUSAL_WINDOW_MS);
    this.refusalWindow.unref();
  }

  get enabled(): boolean {
    return this.settings.enabled;
  }

  get mode(): AuditMode {
    return this.settings.mode;
  }

  /** Appends that failed since start (both files). */
  get failures(): number {
    return this.files().reduce((n, f) => n + f.failures, 0);
  }

  /** Every file appended to: the whole log, the changes, and each kind seen. */
  private files(): AuditFile[] {
    return [this.all, this.changes, ...SEEN_TYPES.map((t) => this.seen[t].file)];
  }

  /** Whether enforced-mode writes would be refused now (a file could not be written). */
  get unavailable(): Error | undefined {
    // What was seen is written best-effort whatever the mode: only the files of changes can refuse a write.
    return this.settings.enabled && this.settings.mode === 'enforced' ? (this.all.failing ?? this.changes.failing) : undefined;
  }

  /** Opens (creating them 0600 in a 0700 directory) the files appended to. */
  async open(): Promise<void> {
    if (!this.settings.enabled) return;
    mkdirSync(dirname(this.settings.path), { recursive: true, mode: 0o700 });
    for (const f of this.files()) await f.reopen();
  }

  /** How an unknown secret is named: an HMAC under this datacenter's key (repeats correlate; the secret stays unknown). */
  nameSecret(secret: string): string {
    return `hmac:${createHmac('sha256', this.keySource() ?? this.fallbackKey)
      .update(secret)
      .digest('base64url')
      .slice(0, 32)}`;
  }

  /**
   * An event's line, newline included (time, place, then the details and `raw`, already JSON
   * members), remembered for the endpoint. Built as text: a write's audit line costs no object.
   */
  private complete(type: AuditType, given: AuditActor, status: number, details: Record<string, unknown>, raw?: string): string {
    const at = Date.now();
    // Whoever emits the event, its path is kept short.
    const actor = given.Path.length > PATH_CHARS ? { ...given, Path: cut(given.Path, given.Path.length) } : given;
    let line: string;
    if (Object.keys(details).some((k) => EVENT_KEYS.has(k))) {
      const event = {
        Time: new Date(at).toISOString(),
        Type: type,
        ...actor,
        Datacenter: this.place.datacenter,
        Server: this.place.server,
        Status: status,
        ...details,
      };
      line = raw ? `${JSON.stringify(event).slice(0, -1)},${raw}}\n` : `${JSON.stringify(event)}\n`;
    } else {
      const a = actor;
      const via = a.ViaAddr !== undefined ? `,"ViaAddr":${quoteJSON(a.ViaAddr)}` : '';
      const who = `"RequestID":${quoteJSON(a.RequestID)},"AccessorID":${quoteJSON(a.AccessorID)},"RemoteAddr":${quoteJSON(a.RemoteAddr)}${via}`;
      const how = `"Method":${quoteJSON(a.Method)},"Path":${quoteJSON(a.Path)}`;
      const rest = `${this.placeMembers}${status}${members(details)}${raw ? `,${raw}` : ''}`;
      line = `{"Time":"${new Date(at).toISOString()}","Type":${quoteJSON(type)},${who},${how}${rest}}\n`;
    }
    const ring = isSeen(type) ? this.seen[type].ring : this.changeRing;
    ring.push(
      line,
      at,
      () =>
        JSON.stringify({
          Time: new Date(at).toISOString(),
          Type: type,
          ...actor,
          Omitted: 'too long to keep in memory; the audit file has it',
        }),
      ++this.sequence,
    );
    // Admin events are logged at info too, without their details.
    if (status < 400 && this.logger.isLevelEnabled('info'))
      this.logger.info({ audit: type, accessor: actor.AccessorID, remote: actor.RemoteAddr }, `audit: ${type}`);
    for (const l of this.listeners) l();
    return line;
  }

  /**
   * An event appended within a moment (best-effort whatever the mode: refusals, reloads,
   * leadership, replication). What an outsider can cause (a refusal, a client's report) is
   * written in full within the burst of its client's address and of its credential (the
   * actor's AccessorID), else counted (refusal-counter.ts) and told once per window.
   */
  record(type: AuditType, actor: AuditActor, status: number, details: Record<string, unknown> = {}, raw?: string): void {
    if (!this.settings.enabled) return;
    if (isSeen(type)) {
      const kind = this.seen[type];
      const sample = { actor, details };
      // No credential (the anonymous token) is no one's in particular: its refusals count against their address alone.
      const credential = actor.AccessorID === ANONYMOUS || actor.AccessorID === '' ? undefined : actor.AccessorID;
      if (!kind.counter.admit(actor.RemoteAddr, status, String(details.Code ?? ''), Date.now(), sample, credential)) return;
      const line = this.complete(type, actor, status, details, raw);
      this.bufferedAll.push(line);
      kind.buffered.push(line);
    } else {
      const line = this.complete(type, actor, status, details, raw);
      this.bufferedAll.push(line);
      this.bufferedChanges.push(line);
    }
    if (this.bufferedAll.length > 1000) void this.flush();
    else this.flushTimer ??= setTimeout(() => void this.flush(), 50);
  }

  /**
   * The refusals counted in the window that ends: one line for each client, status and code, with
   * their Count; past the REFUSAL_SUMMARIES clients with the most, the rest together as client `*`.
   */
  private endRefusalWindow(): void {
    if (!this.settings.enabled) return;
    for (const type of SEEN_TYPES) {
      const kind = this.seen[type];
      for (const c of summarize(kind.counter.drain(), REFUSAL_SUMMARIES)) {
        const actor = { ...c.sample.actor, RemoteAddr: c.client };
        const details = {
          ...c.sample.details,
          Count: c.count,
          First: new Date(c.first).toISOString(),
          Last: new Date(c.last).toISOString(),
        };
        const line = this.complete(type, actor, c.status, details);
        this.bufferedAll.push(line);
        kind.buffered.push(line);
      }
    }
    if (this.bufferedAll.length > 0) this.flushTimer ??= setTimeout(() => void this.flush(), 50);
  }

  /**
   * The events of one group of writes. Enforced: written and synced in both files before this
   * resolves, else AUDIT_UNAVAILABLE (the group is then not written). Best-effort: appended soon.
   */
  async writeGroup(events: readonly AuditGroupEvent[]): Promise<void> {
    if (!this.settings.enabled || events.length === 0) return;
    if (this.settings.mode !== 'enforced') {
      for (const e of events) this.record(e.type, e.actor, 200, e.details, e.raw);
      return;
    }
    const lines = events.map((e) => this.complete(e.type, e.actor, 200, e.details, e.raw));
    await Promise.all([this.all.append(lines, true), this.changes.append(lines, true)]).catch((err: unknown) => {
      throw new WatchwordError(
        'AUDIT_UNAVAILABLE',
        `the audit log cannot be written (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); writes are refused while ` +
          `audit_log_mode is enforced`,
        { cause: err },
      );
    });
  }

  /** Appends what is buffered. */
  flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const pending: Array<[AuditFile, string[]]> = [
      [this.all, this.bufferedAll],
      [this.changes, this.bufferedChanges],
      ...SEEN_TYPES.map((t): [AuditFile, string[]] => [this.seen[t].file, this.seen[t].buffered]),
    ];
    this.bufferedAll = [];
    this.bufferedChanges = [];
    for (const t of SEEN_TYPES) this.seen[t].buffered = [];
    const done: Array<Promise<void>> = [];
    for (const [file, lines] of pending) if (lines.length > 0) done.push(file.append(lines, false).catch(() => undefined));
    if (done.length === 0) return Promise.all(this.files().map((f) => f.settled())).then(() => undefined);
    return Promise.all(done).then(() => undefined);
  }

  /**
   * Recent events of this server, newest first, with a cursor to the next page (events before
   * it): the changes' ring and the refusals' merged by sequence number.
   */
  query(filter: AuditFilter): { events: AuditEvent[]; next?: number } {
    const out: AuditEvent[] = [];
    let lastTag = 0;
    // A line cannot hold an event of this type or caller without this text (the event is parsed to be sure).
    const typeText = filter.type === undefined ? undefined : `"Type":${quoteJSON(filter.type)}`;
    const accessorText = filter.accessor === undefined ? undefined : `"AccessorID":${quoteJSON(filter.accessor)}`;
    // What was seen (refusals, clients' denials) names no object, and is of its own types.
    const seenToo = filter.kind === undefined && filter.id === undefined;
    const changesToo = filter.type === undefined || !isSeen(filter.type);
    const rings = [
      ...(changesToo ? [this.changeRing] : []),
      ...(seenToo ? SEEN_TYPES.filter((t) => filter.type === undefined || filter.type === t).map((t) => this.seen[t].ring) : []),
    ];
    const cursors = rings.map((ring) => ({ ring, seq: ring.latest() }));
    for (;;) {
      // The newest line not yet looked at, of either ring.
      let pick: (typeof cursors)[number] | undefined;
      for (const c of cursors) {
        if (c.seq < c.ring.oldest()) continue;
        if (pick === undefined || c.ring.tagOf(c.seq) > pick.ring.tagOf(pick.seq)) pick = c;
      }
      if (pick === undefined) break;
      const seq = pick.seq--;
      const tag = pick.ring.tagOf(seq);
      if (filter.before !== undefined && tag >= filter.before) continue;
      const at = pick.ring.timeOf(seq);
      if (filter.until !== undefined && at > filter.until) continue;
      if (filter.since !== undefined && at < filter.since) {
        // Older still in this ring: done with it.
        pick.seq = pick.ring.oldest() - 1;
        continue;
      }
      const line = pick.ring.lineOf(seq);
      if ((typeText && !line.includes(typeText)) || (accessorText && !line.includes(accessorText))) continue;
      const event = JSON.parse(line) as AuditEvent;
      if (!matches(event, filter)) continue;
      // One more matches than the page holds: the next page starts before the last one given.
      if (out.length === filter.limit) return { events: out, next: lastTag };
      out.push(event);
      lastTag = tag;
    }
    return { events: out };
  }

  /** The newest event's sequence number (0 before any): what a follower of the log waits past. */
  latest(): number {
    return this.sequence;
  }

  /** Events after `seq`, oldest first (follow mode). */
  after(seq: number, limit: number): Array<{ seq: number; event: AuditEvent }> {
    const out: Array<{ seq: number; event: AuditEvent }> = [];
    const cursors = [this.changeRing, ...SEEN_TYPES.map((t) => this.seen[t].ring)].map((ring) => {
      // The first kept line whose tag is past `seq` (tags rise with line numbers).
      let lo = ring.oldest();
      let hi = ring.latest() + 1;
      while (lo < hi) {
        const mid = Math.floor((lo + hi) / 2);
        if (ring.tagOf(mid) <= seq) lo = mid + 1;
        else hi = mid;
      }
      return { ring, seq: lo };
    });
    while (out.length < limit) {
      let pick: (typeof cursors)[number] | undefined;
      for (const c of cursors) {
        if (c.seq > c.ring.latest()) continue;
        if (pick === undefined || c.ring.tagOf(c.seq) < pick.ring.tagOf(pick.seq)) pick = c;
      }
      if (pick === undefined) break;
      const at = pick.seq++;
      out.push({ seq: pick.ring.tagOf(at), event: JSON.parse(pick.ring.lineOf(at)) as AuditEvent });
    }
    return out;
  }

  /** Told (synchronously) whenever an event is recorded; returns the unsubscription. */
  onEvent(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** New settings (SIGHUP): the files are opened anew where they say. */
  async reload(settings: AuditSettings): Promise<void> {
    await this.flush();
    const moved = settings.path !== this.settings.path || settings.enabled !== this.settings.enabled;
    this.settings = settings;
    await this.all.configure(settings);
    await this.changes.configure({ ...settings, path: changesPathOf(settings.path) });
    for (const t of SEEN_TYPES) await this.seen[t].file.configure({ ...settings, path: seenPathOf(settings.path, t) });
    if (!settings.enabled) {
      for (const f of this.files()) await f.close();
    } else if (moved) {
      await this.open();
    }
  }

  async close(): Promise<void> {
    clearInterval(this.refusalWindow);
    this.endRefusalWindow();
    await this.flush();
    for (const f of this.files()) await f.close();
  }

  /** Size of the file now (tests, status). */
  async fileSize(): Promise<number> {
    return (await stat(this.settings.path).catch(() => ({ size: 0 }))).size;
  }
}

function matches(e: AuditEvent, f: AuditFilter): boolean {
  if (f.type !== undefined && e.Type !== f.type) return false;
  if (f.accessor !== undefined && e.AccessorID !== f.accessor) return false;
  if (f.kind !== undefined || f.id !== undefined) {
    const objects = (e.Objects as Array<{ Kind: string; ID: string }> | undefined) ?? [];
    if (!objects.some((o) => (f.kind === undefined || o.Kind === f.kind) && (f.id === undefined || o.ID === f.id))) return false;
  }
  return true;
}
