/**
 * The synchronous-replication policy (docs/servers.md, "Several servers per datacenter"), pure, as Patroni keeps its own in
 * quorum.py apart from the loop that talks to etcd and the database. The leader
 * (leader.ts) asks it, and owns the sockets, the timers and the publishing.
 *
 * Invariants (each has its tests in test/ha/sync-set.test.ts):
 * 1. A write is acknowledged only once every server the leader waits for has confirmed it
 *    durable; with nobody to wait for, at once (the leader alone holds it, and says so).
 * 2. The leader waits for the published set, for a server being added from before the set
 *    naming it is published (once published it may take over, so it must hold every write
 *    acknowledged from then on), and for a server being dropped until its removal is
 *    published. During a change: the union of the old and the new set.
 * 3. A server joins only when it streams live and has confirmed everything durable on the
 *    leader, and is published only once it also confirmed every batch written before the
 *    leader started waiting for it.
 * 4. A member that holds up the oldest waiting write for longer than the timeout, or whose
 *    stream is gone, is dropped (so one surviving server keeps taking writes).
 * 5. The set never holds more than the servers wanted, nor the same server twice.
 */

/** What the leader knows of one follower's stream. */
export interface MemberState {
  name: string;
  /** The last batch it confirmed durable. */
  ackedSeq: number;
  /** When it last confirmed one, ms. */
  lastAckAt: number;
  /** It receives every batch as it is written (caught up). */
  streaming: boolean;
}

/** Whom the leader waits for while `next` replaces `before` (invariant 2). */
export function waitingFor(before: readonly string[], next: readonly string[]): string[] {
  return [...new Set([...before, ...next])];
}

/**
 * The highest batch every server in `waiting` has confirmed (invariant 1);
 * Number.MAX_SAFE_INTEGER when nobody is waited for. `ackedBy` answers -1 for a server
 * with no stream.
 */
export function confirmedUpTo(waiting: readonly string[], ackedBy: (name: string) => number): number {
  let confirmed = Number.MAX_SAFE_INTEGER;
  for (const name of waiting) confirmed = Math.min(confirmed, ackedBy(name));
  return confirmed;
}

/**
 * Members that hold up the oldest waiting write (batch `oldestWaiting`) past `timeoutMs`,
 * or have no stream at all (invariant 4). Nothing waiting: nobody is slow.
 */
export function slowMembers(
  set: readonly string[],
  member: (name: string) => MemberState | undefined,
  oldestWaiting: number | undefined,
  now: number,
  timeoutMs: number,
): string[] {
  if (oldestWaiting === undefined) return [];
  return set.filter((name) => {
    const m = member(name);
    return !m || (m.ackedSeq < oldestWaiting && now - m.lastAckAt > timeoutMs);
  });
}

/** A follower that may join while the set is short of `wanted` (invariants 3 and 5). */
export function nextMember(set: readonly string[], members: Iterable<MemberState>, durableSeq: number, wanted: number): string | undefined {
  if (set.length >= wanted) return undefined;
  for (const m of members) if (m.streaming && !set.includes(m.name) && m.ackedSeq >= durableSeq) return m.name;
  return undefined;
}

/** Whether every server added by `next` has confirmed batch `upTo`, so the set naming them may be published (invariant 3). */
export function additionsCaughtUp(
  before: readonly string[],
  next: readonly string[],
  ackedBy: (name: string) => number,
  upTo: number,
): boolean {
  return next.every((n) => before.includes(n) || ackedBy(n) >= upTo);
}
