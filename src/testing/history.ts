/**
 * What readers saw during a fault run, checked (as Jepsen's Knossos and Elle check histories,
 * written small for this service's one kind of object): each token is a register that is
 * created once and deleted at most once, so a search over every order of operations reduces
 * to choosing when the create and the delete took effect.
 *
 * Checked per token:
 * - linearizable: reads made with `?consistent` in the token's home datacenter and the writes
 *   (create, delete) can be put in one order that respects real time (a read sees a token after
 *   its create was acknowledged, and not after its delete was);
 * - read-your-writes: a client that created a token through a server (answer not marked
 *   X-Service-Replication-Pending) reads it there afterwards;
 * - monotonic reads: a client never sees a token disappear from a server (without a delete)
 *   after seeing it there, nor that server's index go backwards;
 * - no resurrection: once a server answered that a deleted token is gone, it never answers it
 *   again.
 */

export type OperationKind = 'create' | 'delete' | 'read' | 'self' | 'decision';

export interface Operation {
  /** The client that made it: its reads are expected to be monotonic and to see its own writes. */
  process: string;
  kind: OperationKind;
  /** The token's AccessorID. */
  key: string;
  /** Datacenter it was sent to, and the server (its URL). */
  dc: string;
  server: string;
  /** A read made with ?consistent. */
  consistent?: boolean;
  /** When it was sent and when its answer came, ms. */
  invoked: number;
  completed: number;
  /** ok: done as asked; fail: refused and nothing happened (4xx); unknown: it may or may not have happened (no answer, 5xx). */
  outcome: 'ok' | 'fail' | 'unknown';
  /** Reads (read, self, decision): whether the token was there. */
  found?: boolean;
  /** The answer's X-Service-Index. */
  index?: number;
  /** A write acknowledged before it was readable where it was sent (X-Service-Replication-Pending). */
  pending?: boolean;
  /**
   * On a create: the datacenter that holds the token (the primary for a global token, its own for a
   * Local one). `?consistent` is linearizable there only: at a secondary it is consistent with that
   * datacenter's leader, which replicates the primary asynchronously (as Consul's is).
   */
  home?: string;
}

export type AnomalyKind = 'not-linearizable' | 'read-your-writes' | 'non-monotonic' | 'index-backwards' | 'resurrected' | 'unchecked';

export interface Anomaly {
  kind: AnomalyKind;
  key: string;
  message: string;
  /** The sub-history that shows it. */
  ops: Operation[];
}

const isRead = (o: Operation): boolean => o.kind === 'read' || o.kind === 'self' || o.kind === 'decision';

/** Checks a whole history; the anomalies found, each with the operations that show it. */
export function checkHistory(history: readonly Operation[]): Anomaly[] {
  const byKey = new Map<string, Operation[]>();
  for (const o of history) {
    let list = byKey.get(o.key);
    if (!list) byKey.set(o.key, (list = []));
    list.push(o);
  }
  const out: Anomaly[] = [];
  for (const [key, ops] of byKey) {
    ops.sort((a, b) => a.invoked - b.invoked);
    out.push(...linearizable(key, ops), ...perClient(key, ops), ...resurrections(key, ops));
  }
  out.push(...indexes(history));
  return out;
}

/** The create and the delete, placed in time as the consistent reads require, if they can be. */
function linearizable(key: string, ops: Operation[]): Anomaly[] {
  const creates = ops.filter((o) => o.kind === 'create' && o.outcome !== 'fail');
  const deletes = ops.filter((o) => o.kind === 'delete' && o.outcome !== 'fail');
  const home = creates.find((o) => o.home !== undefined)?.home;
  const reads = ops.filter((o) => isRead(o) && o.consistent && o.outcome === 'ok' && (home === undefined || o.dc === home));
  if (reads.length === 0) return [];
  if (creates.length > 1 || deletes.length > 1)
    return [{ kind: 'unchecked', key, message: `${creates.length} creates and ${deletes.length} deletes of one token: not checked`, ops }];
  const create = creates[0];
  const del = deletes[0];
  const present = reads.filter((r) => r.found);
  const absent = reads.filter((r) => !r.found);
  const witness = (message: string, extra: Operation[]): Anomaly[] => [
    { kind: 'not-linearizable', key, message, ops: [...(create ? [create] : []), ...(del ? [del] : []), ...extra] },
  ];
  if (!create) return present.length > 0 ? witness('a consistent read saw a token that was never created', present.slice(0, 1)) : [];
  // The create takes effect as late as the reads that saw the token allow; the delete as early as possible after it.
  let c = create.outcome === 'ok' ? create.completed : Number.POSITIVE_INFINITY;
  for (const r of present) c = Math.min(c, r.completed);
  if (c < create.invoked)
    return witness(
      'a consistent read saw the token before its create was sent',
      present.filter((r) => r.completed < create.invoked).slice(0, 1),
    );
  let d = Number.POSITIVE_INFINITY;
  if (del) {
    d = Math.max(del.invoked, c + 0.001);
    for (const r of present) d = Math.max(d, r.invoked + 0.001);
    if (del.outcome === 'ok' && d > del.completed) {
      const late = present.filter((r) => r.invoked >= del.completed);
      return witness(
        'a consistent read saw the token after its delete was acknowledged',
        late.length > 0 ? late.slice(0, 1) : present.slice(-1),
      );
    }
  }
  const stale = absent.filter((r) => !(r.invoked < c || r.completed >= d));
  if (stale.length > 0)
    return witness('a consistent read missed the token after its create was acknowledged (and before any delete)', stale.slice(0, 1));
  return [];
}

/** Read-your-writes and monotonic reads, per client and server. */
function perClient(key: string, ops: Operation[]): Anomaly[] {
  const out: Anomaly[] = [];
  const deleteSentAt = Math.min(...ops.filter((o) => o.kind === 'delete').map((o) => o.invoked), Number.POSITIVE_INFINITY);
  for (const create of ops.filter((o) => o.kind === 'create' && o.outcome === 'ok' && !o.pending)) {
    const miss = ops.find(
      (r) =>
        isRead(r) &&
        r.outcome === 'ok' &&
        r.process === create.process &&
        r.server === create.server &&
        r.invoked >= create.completed &&
        !r.found &&
        r.completed < deleteSentAt,
    );
    if (miss)
      out.push({
        kind: 'read-your-writes',
        key,
        message: `${create.process} created the token through ${create.server} and then did not find it there`,
        ops: [create, miss],
      });
  }
  const seen = new Map<string, Operation>();
  for (const r of ops.filter((o) => isRead(o) && o.outcome === 'ok').sort((a, b) => a.invoked - b.invoked)) {
    const at = `${r.process} ${r.server}`;
    const before = seen.get(at);
    if (before?.found && !r.found && before.completed <= r.invoked && r.completed < deleteSentAt) {
      out.push({
        kind: 'non-monotonic',
        key,
        message: `${r.process} saw the token at ${r.server}, then did not (no delete was sent)`,
        ops: [before, r],
      });
    }
    if (r.found || !before?.found) seen.set(at, r);
  }
  return out;
}

/** Once a server has answered that a deleted token is gone, it never answers it again. */
function resurrections(key: string, ops: Operation[]): Anomaly[] {
  const del = ops.find((o) => o.kind === 'delete' && o.outcome === 'ok');
  if (!del) return [];
  const out: Anomaly[] = [];
  const gone = new Map<string, Operation>();
  for (const r of ops.filter((o) => isRead(o) && o.outcome === 'ok' && o.invoked >= del.completed).sort((a, b) => a.invoked - b.invoked)) {
    const g = gone.get(r.server);
    if (!r.found && !g) gone.set(r.server, r);
    else if (r.found && g && g.completed <= r.invoked) {
      out.push({
        kind: 'resurrected',
        key,
        message: `${r.server} answered for the token again after its delete was acknowledged and it had answered that it was gone`,
        ops: [del, g, r],
      });
      break;
    }
  }
  return out;
}

/** A client never sees a server's index go backwards. */
function indexes(history: readonly Operation[]): Anomaly[] {
  const out: Anomaly[] = [];
  const last = new Map<string, Operation>();
  for (const o of [...history]
    .filter((x) => isRead(x) && x.outcome === 'ok' && x.index !== undefined)
    .sort((a, b) => a.invoked - b.invoked)) {
    const at = `${o.process} ${o.server}`;
    const before = last.get(at);
    if (before && before.completed <= o.invoked && (o.index as number) < (before.index as number)) {
      out.push({
        kind: 'index-backwards',
        key: o.key,
        message: `${o.process} saw ${o.server}'s index go from ${before.index} back to ${o.index}`,
        ops: [before, o],
      });
    }
    if (!before || (o.index as number) >= (before.index as number)) last.set(at, o);
  }
  return out;
}

/** An anomaly and its sub-history, for a report. */
export function describeAnomaly(a: Anomaly, origin = 0): string {
  const lines = a.ops.map((o) => {
    const what = isRead(o)
      ? `${o.kind}${o.consistent ? ' ?consistent' : ''} -> ${o.outcome === 'ok' ? (o.found ? 'found' : 'not found') : o.outcome}`
      : `${o.kind} -> ${o.outcome}${o.pending ? ' (replication pending)' : ''}`;
    return (
      `    [${o.invoked - origin}..${o.completed - origin} ms] ${o.process} at ${o.dc} (${o.server}): ` +
      `${what}${o.index !== undefined ? `, index ${o.index}` : ''}`
    );
  });
  return [`  ${a.kind} ${a.key}: ${a.message}`, ...lines].join('\n');
}

/** Records operations as a run makes them. */
export class HistoryRecorder {
  readonly ops: Operation[] = [];

  record(op: Operation): void {
    this.ops.push(op);
  }

  check(): Anomaly[] {
    return checkHistory(this.ops);
  }
}
