import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { type FileHandle, open, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { WatchwordError } from '../domain/errors.js';
import { quoteJSON } from '../domain/json-text.js';
import type { AuditActor } from '../domain/types.js';
import type { AuditGroupEvent } from '../store/store.js';
import { LineRing } from './line-ring.js';

/**
 * The audit log (README: Audit log): who changed what, when and from where, and who was
 * refused. One JSON line per event in `<data_dir>/audit/audit.log` (0600), rotated by size.
 * Writes ride their group commit (store/group-commit.ts): in `best-effort` mode their lines
 * are appended once the group is durable and a failure is logged and counted; in `enforced`
 * mode a group's lines are written and synced before the group itself, and a group whose lines
 * cannot be written is refused (503 AUDIT_UNAVAILABLE). Refusals and other events are
 * buffered and appended within a moment. Secrets never appear: callers are named by their
 * token's AccessorID, or for an unknown secret by an HMAC of it under this datacenter's key.
 */

export type AuditMode = 'best-effort' | 'enforced';

export type { AuditActor } from '../domain/types.js';

/** One event as written. */
export interface AuditEvent extends AuditActor {
  /** RFC 3339 with milliseconds. */
  Time: string;
  Type: string;
  Datacenter: string;
  Server: string;
  Status: number;
  /** What the event changed or why it was refused (objects, counts, reasons). */
  [detail: string]: unknown;
}

/** Keys an event's own fields take: details that would repeat one are written the slow way (the detail wins, as before). */
const EVENT_KEYS = new Set(['Time', 'Type', 'RequestID', 'AccessorID', 'RemoteAddr', 'Method', 'Path', 'Datacenter', 'Server', 'Status']);

/** An object's members as JSON (`,"key":value` each), skipping undefined values as JSON.stringify does. */
function members(o: Record<string, unknown>): string {
  let out = '';
  for (const k in o) {
    const v = o[k];
    if (v !== undefined) out += `,${quoteJSON(k)}:${typeof v === 'string' ? quoteJSON(v) : JSON.stringify(v)}`;
  }
  return out;
}

export interface AuditFilter {
  since?: number;
  until?: number;
  type?: string;
  accessor?: string;
  kind?: string;
  id?: string;
  /** Events before this sequence number (a cursor from an earlier page). */
  before?: number;
  limit: number;
}

export interface AuditSettings {
  enabled: boolean;
  path: string;
  mode: AuditMode;
  rotateBytes: number;
  maxFiles: number;
}

/** A system actor for events no request made (the reaper, leadership, reloads). */
export function systemActor(what: string): AuditActor {
  return { RequestID: '', AccessorID: what, RemoteAddr: '', Method: '', Path: '' };
}

/** A path without its `token` query parameter. */
export function auditPath(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url.slice(0, 2048);
  const params = new URLSearchParams(url.slice(q + 1));
  params.delete('token');
  const rest = params.toString();
  return (rest ? `${url.slice(0, q)}?${rest}` : url.slice(0, q)).slice(0, 2048);
}

/** How many events GET /v1/operator/audit can go back through (the file keeps them all), and in how many bytes at most. */
const RECENT = 10_000;
const RECENT_BYTES = 8 << 20;

export class AuditLog {
  private settings: AuditSettings;
  private file: FileHandle | undefined;
  private size = 0;
  /** Lines waiting to be appended (best-effort events, refusals). */
  private buffered: string[] = [];
  private flushTimer: NodeJS.Timeout | undefined;
  /** Appends, one at a time, in order. */
  private chain: Promise<void> = Promise.resolve();
  /** The last RECENT events' lines, numbered in this server's sequence. */
  private readonly recent = new LineRing(RECENT, RECENT_BYTES);
  private failing: Error | undefined;
  private lastComplaint = 0;
  /** Until this datacenter's key is known (its first leader makes it): a key of this process. */
  private readonly fallbackKey: Buffer = randomBytes(32);
  /** Told whenever an event is recorded (follow mode). */
  private readonly listeners = new Set<() => void>();
  failures = 0;
  /** The members every line has after the actor's, up to the status. */
  private readonly placeMembers: string;

  constructor(
    settings: AuditSettings,
    private readonly place: { datacenter: string; server: string },
    private readonly logger: Logger,
    /** This datacenter's key for naming unknown secrets (undefined until its first leader made it). */
    private readonly keySource: () => Uint8Array | undefined = () => undefined,
  ) {
    this.settings = settings;
    this.placeMembers = `,"Datacenter":${JSON.stringify(place.datacenter)},"Server":${JSON.stringify(place.server)},"Status":`;
  }

  get enabled(): boolean {
    return this.settings.enabled;
  }

  get mode(): AuditMode {
    return this.settings.mode;
  }

  /** Whether enforced-mode writes would be refused now (the file could not be written). */
  get unavailable(): Error | undefined {
    return this.settings.enabled && this.settings.mode === 'enforced' ? this.failing : undefined;
  }

  /** Opens (creating it 0600 in a 0700 directory) the file appended to. */
  async open(): Promise<void> {
    if (!this.settings.enabled) return;
    mkdirSync(dirname(this.settings.path), { recursive: true, mode: 0o700 });
    await this.reopen();
  }

  private async reopen(): Promise<void> {
    await this.file?.close().catch(() => undefined);
    this.file = await open(this.settings.path, 'a', 0o600);
    await this.file.chmod(0o600);
    this.size = (await this.file.stat()).size;
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
  private complete(type: string, actor: AuditActor, status: number, details: Record<string, unknown>, raw?: string): string {
    const at = Date.now();
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
      const who = `"RequestID":${quoteJSON(a.RequestID)},"AccessorID":${quoteJSON(a.AccessorID)},"RemoteAddr":${quoteJSON(a.RemoteAddr)}`;
      const how = `"Method":${quoteJSON(a.Method)},"Path":${quoteJSON(a.Path)}`;
      const rest = `${this.placeMembers}${status}${members(details)}${raw ? `,${raw}` : ''}`;
      line = `{"Time":"${new Date(at).toISOString()}","Type":${quoteJSON(type)},${who},${how}${rest}}\n`;
    }
    this.recent.push(line, at, () =>
      JSON.stringify({
        Time: new Date(at).toISOString(),
        Type: type,
        ...actor,
        Omitted: 'too long to keep in memory; the audit file has it',
      }),
    );
    // Admin events are logged at info too, without their details.
    if (status < 400) this.logger.info({ audit: type, accessor: actor.AccessorID, remote: actor.RemoteAddr }, `audit: ${type}`);
    for (const l of this.listeners) l();
    return line;
  }

  /** An event appended within a moment (best-effort whatever the mode: refusals, reloads, leadership, replication). */
  record(type: string, actor: AuditActor, status: number, details: Record<string, unknown> = {}, raw?: string): void {
    if (!this.settings.enabled) return;
    this.buffered.push(this.complete(type, actor, status, details, raw));
    if (this.buffered.length > 1000) void this.flush();
    else this.flushTimer ??= setTimeout(() => void this.flush(), 50);
  }

  /**
   * The events of one group of writes. Enforced: written and synced before this resolves,
   * else AUDIT_UNAVAILABLE (the group is then not written). Best-effort: appended soon.
   */
  async writeGroup(events: readonly AuditGroupEvent[]): Promise<void> {
    if (!this.settings.enabled || events.length === 0) return;
    if (this.settings.mode !== 'enforced') {
      for (const e of events) this.record(e.type, e.actor, 200, e.details, e.raw);
      return;
    }
    const lines = events.map((e) => this.complete(e.type, e.actor, 200, e.details, e.raw));
    await this.append(lines, true).catch((err: unknown) => {
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
    const lines = this.buffered;
    this.buffered = [];
    if (lines.length === 0) return this.chain;
    return this.append(lines, false).catch(() => undefined);
  }

  private append(pending: string[], sync: boolean): Promise<void> {
    const run = async (): Promise<void> => {
      let lines = pending;
      try {
        if (!this.file) await this.reopen();
        // The usual case: everything fits before the next rotation, in one write.
        const text = lines.length === 1 ? (lines[0] as string) : lines.join('');
        const bytes = Buffer.byteLength(text);
        if (this.size + bytes <= this.settings.rotateBytes) {
          await this.write(Buffer.from(text), sync);
          lines = [];
        }
        // Whole lines per file: the lines that fit go before a rotation, the rest after it. An
        // enforced group's lines stay together (all written or none), whatever its size.
        for (let i = 0; i < lines.length; ) {
          let bytes = 0;
          let j = i;
          for (; j < lines.length; j++) {
            const n = Buffer.byteLength(lines[j] as string);
            if (this.size + bytes + n > this.settings.rotateBytes && this.size + bytes > 0) break;
            bytes += n;
          }
          if (sync && j < lines.length && j > i) j = this.size > 0 ? i : lines.length;
          if (j === i) {
            await this.rotate();
            continue;
          }
          await this.write(Buffer.from(lines.slice(i, j).join('')), sync);
          i = j;
        }
        if (this.failing) this.logger.warn('audit: the audit log is written again');
        this.failing = undefined;
      } catch (err) {
        this.failing = err as Error;
        this.failures++;
        if (Date.now() - this.lastComplaint > 10_000) {
          this.lastComplaint = Date.now();
          this.logger.error(
            { err: (err as Error).message, path: this.settings.path },
            `audit: cannot write the audit log${this.settings.mode === 'enforced' ? '; writes are refused' : ''}`,
          );
        }
        // A line cut short (a full disk) is taken back, so the file stays whole lines; a handle that
        // failed may be stale (the file moved, the disk came back): it is opened again next time.
        await this.file?.truncate(this.size).catch(() => undefined);
        await this.file?.close().catch(() => undefined);
        this.file = undefined;
        throw err;
      }
    };
    const next = this.chain.then(run, run);
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Appends whole lines (synced when asked); the size counts only once they are all written. */
  private async write(data: Buffer, sync: boolean): Promise<void> {
    const file = this.file as FileHandle;
    // A write may be short (a disk filling up): the rest is written, or the error that stops it thrown.
    for (let off = 0; off < data.length; ) {
      const { bytesWritten } = await file.write(data, off, data.length - off);
      if (bytesWritten <= 0) throw Object.assign(new Error('no space left on device'), { code: 'ENOSPC' });
      off += bytesWritten;
    }
    if (sync) await file.datasync();
    this.size += data.length;
  }

  /** audit.log -> audit.log.1 -> … -> audit.log.<max>, the oldest dropped. */
  private async rotate(): Promise<void> {
    const { path, maxFiles } = this.settings;
    await this.file?.close().catch(() => undefined);
    this.file = undefined;
    await rm(`${path}.${maxFiles}`, { force: true });
    for (let i = maxFiles - 1; i >= 1; i--) {
      await rename(`${path}.${i}`, `${path}.${i + 1}`).catch(() => undefined);
    }
    await rename(path, `${path}.1`);
    await this.reopen();
  }

  /** Recent events of this server, newest first, with a cursor to the next page (events before it). */
  query(filter: AuditFilter): { events: AuditEvent[]; next?: number } {
    const out: AuditEvent[] = [];
    let lastSeq = 0;
    // A line cannot hold an event of this type or caller without this text (the event is parsed to be sure).
    const typeText = filter.type === undefined ? undefined : `"Type":${quoteJSON(filter.type)}`;
    const accessorText = filter.accessor === undefined ? undefined : `"AccessorID":${quoteJSON(filter.accessor)}`;
    const oldest = this.recent.oldest();
    for (let seq = this.recent.latest(); seq >= oldest; seq--) {
      if (filter.before !== undefined && seq >= filter.before) continue;
      const at = this.recent.timeOf(seq);
      if (filter.until !== undefined && at > filter.until) continue;
      if (filter.since !== undefined && at < filter.since) break;
      const line = this.recent.lineOf(seq);
      if ((typeText && !line.includes(typeText)) || (accessorText && !line.includes(accessorText))) continue;
      const event = JSON.parse(line) as AuditEvent;
      if (!matches(event, filter)) continue;
      // One more matches than the page holds: the next page starts before the last one given.
      if (out.length === filter.limit) return { events: out, next: lastSeq };
      out.push(event);
      lastSeq = seq;
    }
    return { events: out };
  }

  /** The newest event's sequence number (0 before any): what a follower of the log waits past. */
  latest(): number {
    return this.recent.latest();
  }

  /** Events after `seq`, oldest first (follow mode). */
  after(seq: number, limit: number): Array<{ seq: number; event: AuditEvent }> {
    const out: Array<{ seq: number; event: AuditEvent }> = [];
    const latest = this.recent.latest();
    for (let s = Math.max(seq + 1, this.recent.oldest()); s <= latest && out.length < limit; s++) {
      out.push({ seq: s, event: JSON.parse(this.recent.lineOf(s)) as AuditEvent });
    }
    return out;
  }

  /** Told (synchronously) whenever an event is recorded; returns the unsubscription. */
  onEvent(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** New settings (SIGHUP): the file is opened anew where they say. */
  async reload(settings: AuditSettings): Promise<void> {
    await this.flush();
    const moved = settings.path !== this.settings.path || settings.enabled !== this.settings.enabled;
    this.settings = settings;
    if (!settings.enabled) {
      await this.file?.close().catch(() => undefined);
      this.file = undefined;
    } else if (moved) {
      await this.open();
    }
  }

  async close(): Promise<void> {
    await this.flush();
    await this.chain;
    await this.file?.close().catch(() => undefined);
    this.file = undefined;
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
