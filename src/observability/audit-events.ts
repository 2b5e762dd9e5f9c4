// The audit log's events, filters and settings, and the bounds and file paths it keeps to
// (observability/audit.ts writes and reads the log).
import { quoteJSON } from '../domain/json-text.js';
import type { AuditActor } from '../domain/types.js';
import type { AuditFile } from './audit-file.js';
import type { LineRing } from './line-ring.js';
import type { CountedRefusals, RefusalCounter } from './refusal-counter.js';
import type { AuditType } from '../domain/audit-types.js';

export type AuditMode = 'best-effort' | 'enforced';

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
export const EVENT_KEYS = new Set([
  'Time',
  'Type',
  'RequestID',
  'AccessorID',
  'RemoteAddr',
  'ViaAddr',
  'Method',
  'Path',
  'Datacenter',
  'Server',
  'Status',
]);

/** An object's members as JSON (`,"key":value` each), skipping undefined values as JSON.stringify does. */
export function members(o: Record<string, unknown>): string {
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
  type?: AuditType;
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

/** Longest path an event keeps: a refused request's path is the caller's to choose. */
export const PATH_CHARS = 512;

/** A path without its `token` query parameter, cut short past PATH_CHARS (saying how long it was). */
export function auditPath(url: string): string {
  const q = url.indexOf('?');
  let path = url.slice(0, q < 0 ? url.length : q);
  const queryCut = q >= 0 && url.length - q - 1 > 4 * PATH_CHARS;
  if (q >= 0) {
    // Only as much of a long query as is kept is parsed.
    const params = new URLSearchParams(url.slice(q + 1, q + 1 + 4 * PATH_CHARS));
    params.delete('token');
    const rest = params.toString();
    if (rest) path += `?${rest}`;
  }
  return path.length <= PATH_CHARS && !queryCut ? path : cut(path, url.length);
}

export const cut = (path: string, length: number): string => `${path.slice(0, PATH_CHARS - 32)}…[cut: ${length} chars]`;

/** How many events GET /v1/operator/audit can go back through (the files keep them all), and in how many bytes at most. */
export const RECENT = 10_000;
export const RECENT_BYTES = 8 << 20;
/** The refusals kept in memory apart: no flood of them can push a change out of the endpoint's reach. */
export const RECENT_REFUSALS = 10_000;
export const RECENT_REFUSAL_BYTES = 4 << 20;
/** How often the refusals counted (beyond each client's burst) are written as one line each. */
export const REFUSAL_WINDOW_MS = 60_000;

/** Clients whose counted refusals get a line each per window; the others share one per status and code. */
export const REFUSAL_SUMMARIES = 100;

/** The `max` largest counts as they are, the others merged per status and code under client `*`. */
export function summarize<S>(counted: Array<CountedRefusals<S>>, max: number): Array<CountedRefusals<S>> {
  if (counted.length <= max) return counted;
  counted.sort((a, b) => b.count - a.count);
  const out = counted.slice(0, max);
  const rest = new Map<string, CountedRefusals<S>>();
  for (const c of counted.slice(max)) {
    const key = `${c.status}\u0000${c.code}`;
    const m = rest.get(key);
    if (m === undefined) rest.set(key, { ...c, client: '*' });
    else {
      m.count += c.count;
      m.first = Math.min(m.first, c.first);
      if (c.last >= m.last) {
        m.last = c.last;
        m.sample = c.sample;
      }
    }
  }
  return [...out, ...rest.values()];
}

/** How the audit log names a caller that sent no token. */
export const ANONYMOUS = 'anonymous';

/** The type of a refused request's event (and of the lines that count refusals). */
export const REFUSED = 'refused' satisfies AuditType;

/**
 * What was seen, not changed: refusals, and enforcing clients' denials. Each kind is kept apart
 * from changes and from the other, in memory and on disk (a file of its own beside the audit
 * log), and each is admitted a burst per client and credential, then counted: no flood of one
 * kind can rotate away the record of changes or of the other kind.
 */
export const SEEN_TYPES = [REFUSED, 'denied-by-client'] as const satisfies readonly AuditType[];
export type SeenType = (typeof SEEN_TYPES)[number];
export const isSeen = (type: AuditType): type is SeenType => (SEEN_TYPES as readonly AuditType[]).includes(type);

/**
 * The file that keeps only changes (every event but what was seen), beside the audit log:
 * `audit.log` -> `audit-changes.log`. Rotated on its own, so refusals never rotate a change away.
 */
export function changesPathOf(path: string): string {
  return beside(path, 'changes');
}

/** The file of one kind of what was seen: `audit.log` -> `audit-refused.log`, `audit-denied-by-client.log`. */
export function seenPathOf(path: string, type: SeenType): string {
  return beside(path, type);
}

export const beside = (path: string, kind: string): string =>
  path.endsWith('.log') ? `${path.slice(0, -4)}-${kind}.log` : `${path}-${kind}`;

/** One kind of what was seen: its file, its ring, and who may add how many lines to them. */
export interface SeenKind {
  file: AuditFile;
  ring: LineRing;
  counter: RefusalCounter<RefusalSample>;
  buffered: string[];
}

/** What a refusal line says beyond its actor: kept for the line that counts the refusals past a burst. */
export interface RefusalSample {
  actor: AuditActor;
  details: Record<string, unknown>;
}
