import type { ReportFrame, ReportedEntry } from '../api/watch-frames.js';
import type { AuditLog } from '../observability/audit.js';
import type { RecentChecks } from './recent-checks.js';

/**
 * Enforcing clients' reports of their decisions (docs/operator-insight.md, "Denials seen by enforcing clients"), as
 * they come over a watch (authorizer-watch.ts; client/decision-reports.ts sends them; the frame
 * is declared in api/watch-frames.ts), the tokens named by the client's watch numbers. Taken at
 * most twice a second per connection, each token named by AccessorID only while its secret
 * still authenticates, then audited under the watch's own credential and noted for dry runs.
 */

/** Reports from one connection closer together than this are passed over (and counted in the next). */
const REPORT_EVERY_MS = 500;

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
  /** The AccessorID of the token the watch was opened with: who is speaking. */
  credential: string;
  denied: Array<ReportedCheck & { count: number }>;
  allowed: ReportedCheck[];
  /** Secrets it denied with no token to name (unknown, deleted, malformed). */
  unknown: number;
  /** Decisions it could not report (its bounds, or this server away), and reports this server passed over (too frequent). */
  dropped: number;
}

/** One connection's reports: at most one every REPORT_EVERY_MS (the rest counted in the next), tokens named by AccessorID. */
export class ReportIntake {
  private lastAt = Number.NEGATIVE_INFINITY;
  /** Entries of reports passed over for coming too soon after the last: told with the next. */
  private passedOver = 0;

  /**
   * The report as the server passes it on, or undefined when it came too soon. `accessorOf`
   * names a watched token whose secret authenticates now; any other id names nothing and is left out.
   */
  take(
    frame: ReportFrame,
    accessorOf: (id: number) => string | undefined,
    who: { address: string; credential: string },
    now = Date.now(),
  ): ClientReport | undefined {
    if (now - this.lastAt < REPORT_EVERY_MS) {
      this.passedOver += frame.denied.length + frame.allowed.length;
      return undefined;
    }
    this.lastAt = now;
    const named = (e: ReportedEntry): ReportedCheck | undefined => {
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
    return { client: frame.client, ...who, denied, allowed, unknown: frame.unknown, dropped };
  }
}

/** Denials listed in full on one audit line; past them, counted. */
const MAX_LISTED = 100;
/** Longest segment written in an audit line: a client chooses what it asks about. */
const SEGMENT_CHARS = 256;

const cutSegment = (s: string): string => (s.length <= SEGMENT_CHARS ? s : `${s.slice(0, SEGMENT_CHARS - 24)}…[cut: ${s.length} chars]`);

/**
 * What an enforcing client's report does: its checks join the recent ones (dry runs judge them),
 * and its denials are audited as one `denied-by-client` line under the watch's credential, each
 * denial by AccessorID and check with its count. Secrets it could not name alone are counted by
 * the client, never audited: they name nothing here.
 */
export function clientReports(recent: RecentChecks, audit: Pick<AuditLog, 'record'> | undefined) {
  return (r: ClientReport): void => {
    for (const c of [...r.allowed, ...r.denied])
      recent.record(c.accessor, c.resource, c.segment, c.access, c.partition, c.namespace, `client:${r.credential}`);
    if (r.denied.length === 0) return;
    const count = r.denied.reduce((n, d) => n + d.count, 0);
    const listed = [...r.denied].sort((a, b) => b.count - a.count).slice(0, MAX_LISTED);
    audit?.record(
      'denied-by-client',
      { RequestID: '', AccessorID: r.credential, RemoteAddr: r.address, Method: 'WS', Path: '/v1/internal/acl/authorizer/watch' },
      200,
      {
        Client: r.client,
        Denials: listed.map((d) => ({
          AccessorID: d.accessor,
          Resource: d.resource,
          ...(d.segment !== undefined ? { Segment: cutSegment(d.segment) } : {}),
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
