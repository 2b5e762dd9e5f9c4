import type { AuditLog } from '../observability/audit.js';
import type { RecentChecks } from './recent-checks.js';

/**
 * Enforcing clients' reports of their decisions (SPEC §22, "Denials seen by enforcing clients"),
 * as they come over a watch (authorizer-watch.ts; client/decision-reports.ts sends them):
 * `{"t":"report","client":NAME,"denied":[[id,resource,segment,access,partition,namespace,count],…],
 * "allowed":[[id,resource,segment,access,partition,namespace],…],"unknown":N,"dropped":N}`, the
 * tokens named by the client's watch numbers. Checked here, named by AccessorID, taken at most
 * twice a second per connection, then audited and noted for dry runs.
 */

/** Entries one report may hold. */
export const MAX_REPORTED = 1_000;
/** Reports from one connection closer together than this are passed over (and counted in the next). */
const REPORT_EVERY_MS = 500;

/** One reported decision: [id, resource, segment or null, access, partition, namespace(, count for a denial)]. */
type Reported = [number, string, string | null, string, string, string, number?];

export interface ReportFrame {
  t: 'report';
  client: string;
  denied: Reported[];
  allowed: Reported[];
  unknown: number;
  dropped: number;
}

/** A check an enforcing client decided, for a token it watches. */
export interface ReportedCheck {
  accessor: string;
  resource: string;
  segment: string | undefined;
  access: string;
  partition: string;
  namespace: string;
}

/** What an enforcing client reported, as the server passes it on. */
export interface ClientReport {
  client: string;
  address: string;
  denied: Array<ReportedCheck & { count: number }>;
  allowed: ReportedCheck[];
  /** Secrets it denied with no token to name (unknown, deleted, malformed). */
  unknown: number;
  /** Decisions it could not report (its bounds, or this server away), and reports this server passed over (too frequent). */
  dropped: number;
}

const shortText = (v: unknown, max: number): v is string => typeof v === 'string' && v.length <= max;

function isReported(e: unknown, denial: boolean, isId: (v: unknown) => boolean): e is Reported {
  return (
    Array.isArray(e) &&
    e.length === (denial ? 7 : 6) &&
    isId(e[0]) &&
    shortText(e[1], 32) &&
    (e[2] === null || shortText(e[2], 4096)) &&
    shortText(e[3], 16) &&
    shortText(e[4], 64) &&
    shortText(e[5], 64) &&
    (!denial || (Number.isSafeInteger(e[6]) && (e[6] as number) > 0))
  );
}

/** A report frame checked, or why it cannot be taken (each reason fits a WebSocket close frame: 123 bytes). */
export function parseReport(f: Record<string, unknown>, isId: (v: unknown) => boolean): ReportFrame | string {
  if (!shortText(f.client, 128) || f.client === '') return 'report: client must be a name of 1 to 128 characters';
  if (!Array.isArray(f.denied) || !Array.isArray(f.allowed)) return 'report: denied and allowed must be arrays';
  if (f.denied.length + f.allowed.length > MAX_REPORTED) return `report: at most ${MAX_REPORTED} entries`;
  if (!isId(f.unknown) || !isId(f.dropped)) return 'report: unknown and dropped must be whole numbers';
  if (!f.denied.every((e) => isReported(e, true, isId)) || !f.allowed.every((e) => isReported(e, false, isId)))
    return 'report: each entry is [id, resource, segment, access, partition, namespace], and a denial its count';
  return f as unknown as ReportFrame;
}

/** One connection's reports: at most one every REPORT_EVERY_MS (the rest counted in the next), tokens named by AccessorID. */
export class ReportIntake {
  private lastAt = Number.NEGATIVE_INFINITY;
  /** Entries of reports passed over for coming too soon after the last: told with the next. */
  private passedOver = 0;

  /** The report as the server passes it on, or undefined when it came too soon. An id the connection does not watch names nothing and is left out. */
  take(frame: ReportFrame, accessorOf: (id: number) => string | undefined, address: string): ClientReport | undefined {
    const now = Date.now();
    if (now - this.lastAt < REPORT_EVERY_MS) {
      this.passedOver += frame.denied.length + frame.allowed.length;
      return undefined;
    }
    this.lastAt = now;
    const named = (e: Reported): ReportedCheck | undefined => {
      const accessor = accessorOf(e[0]);
      if (accessor === undefined) return undefined;
      return { accessor, resource: e[1], segment: e[2] ?? undefined, access: e[3], partition: e[4], namespace: e[5] };
    };
    const denied: ClientReport['denied'] = [];
    for (const e of frame.denied) {
      const c = named(e);
      if (c) denied.push({ ...c, count: e[6] as number });
    }
    const allowed = frame.allowed.map(named).filter((c): c is ReportedCheck => c !== undefined);
    const dropped = frame.dropped + this.passedOver;
    this.passedOver = 0;
    return { client: frame.client, address, denied, allowed, unknown: frame.unknown, dropped };
  }
}

/** Denials listed in full on one audit line; past them, counted. */
const MAX_LISTED = 100;

/**
 * What an enforcing client's report does (SPEC §22): its checks join the recent ones (dry runs
 * judge them), and its denials are audited as one `denied-by-client` line naming the client,
 * each denial by AccessorID and check with its count.
 */
export function clientReports(recent: RecentChecks, audit: Pick<AuditLog, 'record'> | undefined, exists: (accessor: string) => boolean) {
  return (r: ClientReport): void => {
    for (const c of [...r.allowed, ...r.denied])
      if (exists(c.accessor)) recent.record(c.accessor, c.resource, c.segment, c.access, c.partition, c.namespace);
    if (r.denied.length === 0 && r.unknown === 0) return;
    const count = r.denied.reduce((n, d) => n + d.count, 0);
    const listed = [...r.denied].sort((a, b) => b.count - a.count).slice(0, MAX_LISTED);
    audit?.record(
      'denied-by-client',
      { RequestID: '', AccessorID: 'client', RemoteAddr: r.address, Method: 'WS', Path: '/v1/internal/acl/authorizer/watch' },
      200,
      {
        Client: r.client,
        Denials: listed.map((d) => ({
          AccessorID: d.accessor,
          Resource: d.resource,
          ...(d.segment !== undefined ? { Segment: d.segment } : {}),
          Access: d.access,
          Namespace: d.namespace,
          Partition: d.partition,
          Count: d.count,
        })),
        Count: count,
        ...(r.denied.length > listed.length ? { NotListed: r.denied.length - listed.length } : {}),
        ...(r.unknown > 0 ? { UnknownSecrets: r.unknown } : {}),
        ...(r.dropped > 0 ? { Dropped: r.dropped } : {}),
      },
    );
  };
}
