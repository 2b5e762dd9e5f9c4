/**
 * The election's decisions (docs/servers.md, "Several servers per datacenter") without etcd: fed what etcd answered and the time,
 * it says what to ask etcd next and whether this server leads. The shell
 * (`coordinator.ts`) owns the client, the timers and the calls, as Patroni keeps its
 * policy apart from the loop that talks to etcd.
 *
 * Invariants (each has its tests in test/ha/election.test.ts):
 * 1. Leadership and the lease that proves it move together: this server leads only while
 *    the leader key is on its current lease and that lease is surely alive (etcd
 *    confirmed a keep-alive sent less than TTL minus a margin ago).
 * 2. A lease that is no longer surely alive is retired for good: it is never kept alive
 *    again; as soon as etcd answers, the leader key is deleted if it is still on that
 *    lease, and the lease is revoked. The next term runs on a new lease. So a server that
 *    stopped leading never leaves behind a key that names it and blocks every other
 *    server (the bug of an etcd restart: the old lease survived, the key with it, and
 *    nobody led).
 * 3. A leader key naming this server on a lease it does not hold is a previous life's
 *    (this server restarted): it is resigned on that life's behalf in the same way.
 * 4. A server campaigns only on a surely alive lease, only when no leader key exists, and
 *    only if it was the previous leader or is in its synchronous set; etcd checks the
 *    key's absence and the synchronous set's revision again in the campaign's transaction.
 * 5. A leader key is followed only when it names a registered server, at the address it
 *    registered, on the lease its registration is on: a real leader puts both on one lease.
 *    Any other key (put by hand or by an impostor, without a lease or on a stranger's) is
 *    no leader: nobody follows it, and any server deletes it (in a transaction on its
 *    revision), so the datacenter elects a real one.
 * 6. A server acknowledges writes only once the synchronous-set record names it as leader of
 *    its term. Until then the record is the previous leader's, which lets that leader and its
 *    set take over: a new leader that acknowledged writes alone under it could be succeeded by
 *    a server that lacks them. So the campaign writes the leader key and a record naming the
 *    winner with no members in one transaction, and a leader whose key is not matched by the
 *    record claims it before anything else.
 */

/** A server of the datacenter, as the coordinator knows it. */
export interface ServerInfo {
  name: string;
  /** HTTP address, host:port. */
  address: string;
}

export interface LeaderInfo extends ServerInfo {
  /** Leadership term: grows with every new leader (the leader key's create revision). */
  term: number;
}

/** What the leader published as its synchronous set (only these may succeed it). */
export interface SyncRecord {
  leader: string;
  term: number;
  members: string[];
}

/** The election's keys in etcd, as one read saw them. */
export interface ElectionView {
  /** `revision`: the key's mod revision. */
  leader?: { server: ServerInfo; term: number; lease: string; revision?: string };
  sync?: { record: SyncRecord; revision: string };
  /** Registered servers, each with the lease its key is on. */
  servers: Array<ServerInfo & { lease: string }>;
}

/** The next thing to ask etcd. */
export type EtcdStep =
  /** Delete the leader key if it is on `lease`, then revoke `lease`. */
  | { kind: 'resign'; lease: string }
  | { kind: 'grant' }
  | { kind: 'read' }
  /** Put this server's registration on `lease`. */
  | { kind: 'register'; lease: string }
  /** Create the leader key on `lease` if it is absent and the sync key is at `syncRevision`. */
  | { kind: 'campaign'; lease: string; syncRevision: string | undefined }
  /** Delete a leader key that no server put (invariant 5), if it is still at `revision`. */
  | { kind: 'clear'; revision: string }
  /** Publish a synchronous-set record naming this server, term `term`, no members, if the leader key is on `lease` (invariant 6). */
  | { kind: 'claim'; lease: string; term: number }
  | { kind: 'idle' };

export interface ElectionSettings {
  self: ServerInfo;
  /** Lease time to live, ms. */
  leaseMs: number;
  /** Leadership ends this long before the lease could end, ms. */
  marginMs: number;
}

export class Election {
  private lease: { id: string; validUntil: number } | undefined;
  /** Leases that lapsed: never kept alive again, resigned and revoked once etcd answers. */
  private readonly retired = new Set<string>();
  private view: ElectionView = { servers: [] };
  /** Whether the view was read in this round. */
  private fresh = false;
  private trouble = '';
  private notes: string[] = [];

  constructor(private readonly settings: ElectionSettings) {}

  /** A new round of the loop: the keys must be read again before anything is decided. */
  beginRound(now: number): void {
    this.expire(now);
    this.fresh = false;
  }

  /** What to ask etcd next in this round ('idle': nothing more until the next round). */
  next(now: number): EtcdStep {
    this.expire(now);
    const [retired] = this.retired;
    if (retired !== undefined) return { kind: 'resign', lease: retired };
    if (!this.lease) return { kind: 'grant' };
    if (!this.fresh) return { kind: 'read' };
    const me = this.settings.self.name;
    const lease = this.lease.id;
    const key = this.view.leader;
    if (key && !this.isGenuine(key)) return { kind: 'clear', revision: key.revision ?? String(key.term) };
    if (key && key.server.name === me && key.lease !== lease) return { kind: 'resign', lease: key.lease };
    if (!this.view.servers.some((s) => s.name === me && s.lease === lease)) return { kind: 'register', lease };
    if (key && key.server.name === me && key.lease === lease && !this.ownsRecord()) return { kind: 'claim', lease, term: key.term };
    if (!key && this.mayCampaign()) return { kind: 'campaign', lease, syncRevision: this.view.sync?.revision };
    // Said once in the log when this server starts waiting for another to take over.
    const waiting = key ? '' : (this.problem() ?? '');
    if (waiting !== this.waiting && waiting !== '') this.notes.push(`no leader, and this server ${waiting}`);
    this.waiting = waiting;
    return { kind: 'idle' };
  }

  /** Why this server last found it may not campaign ('' when it could, or a leader was there). */
  private waiting = '';

  /** Whether a leader key was put by the server it names (invariant 5). */
  private isGenuine(key: NonNullable<ElectionView['leader']>): boolean {
    if (key.lease === '0' || key.lease === '') return false;
    return this.view.servers.some((s) => s.name === key.server.name && s.address === key.server.address && s.lease === key.lease);
  }

  /** A leader key that no server put is gone (or was replaced meanwhile). */
  cleared(): void {
    this.notes.push("removed a leader key that no server of this datacenter put (no lease, or not its registration's)");
    this.fresh = false;
  }

  /** The previous leader and its synchronous set may take over; anyone when none was ever published. */
  private mayCampaign(): boolean {
    const sync = this.view.sync?.record;
    const me = this.settings.self.name;
    return !sync || sync.leader === me || sync.members.includes(me);
  }

  /** A lease was granted; `sentAt` is when the grant was asked for. */
  granted(lease: string, sentAt: number): void {
    this.lease = { id: lease, validUntil: sentAt + this.settings.leaseMs };
    this.trouble = '';
  }

  /** etcd answered a keep-alive of `lease` sent at `sentAt` with `ttlMs` left (0: it is gone). */
  keptAlive(lease: string, sentAt: number, ttlMs: number): void {
    if (this.lease?.id !== lease) return; // retired meanwhile: its answer changes nothing
    if (ttlMs > 0) {
      this.lease.validUntil = Math.max(this.lease.validUntil, sentAt + ttlMs);
      return;
    }
    // Gone in etcd, and with it every key on it: nothing to resign or revoke.
    this.lease = undefined;
    this.trouble = 'found its lease expired in etcd';
    this.notes.push(`lease ${lease} expired in etcd; this server takes a new one`);
  }

  observed(view: ElectionView, now: number): void {
    this.view = view;
    this.fresh = true;
    this.trouble = '';
    this.expire(now);
  }

  /** Registration of this server put on `lease`. */
  registered(lease: string): void {
    if (this.view.servers.some((s) => s.name === this.settings.self.name && s.lease === lease)) return;
    this.view = {
      ...this.view,
      servers: [...this.view.servers.filter((s) => s.name !== this.settings.self.name), { ...this.settings.self, lease }],
    };
  }

  /**
   * The campaign's transaction: `term` is its revision when it took the key. It wrote the
   * leader key and a record of the synchronous set naming this server with no members
   * (invariant 6), both at that revision.
   */
  campaigned(lease: string, won: boolean, term: number): void {
    if (!won) {
      this.fresh = false; // someone else was quicker: read who
      return;
    }
    this.view = {
      ...this.view,
      leader: { server: this.settings.self, term, lease, revision: String(term) },
      sync: { record: { leader: this.settings.self.name, term, members: [] }, revision: String(term) },
    };
    this.notes.push(`won the election in term ${term}; this server leads`);
  }

  /**
   * Whether the synchronous-set record names this server as the leader of the term its key
   * holds (a record written with the key carries the key's revision).
   */
  private ownsRecord(): boolean {
    const key = this.view.leader;
    const sync = this.view.sync;
    if (!key || !sync || sync.record.leader !== this.settings.self.name) return false;
    return sync.record.term === key.term || sync.revision === String(key.term);
  }

  /** The synchronous set is published at `revision`. */
  syncPublished(record: SyncRecord, revision: string): void {
    this.view = { ...this.view, sync: { record, revision } };
  }

  /** The leader key is off `lease` and `lease` is revoked (or was already gone). */
  resigned(lease: string): void {
    const wasRetired = this.retired.delete(lease);
    this.notes.push(
      wasRetired
        ? `resigned: the leader key is off lease ${lease}, which is revoked`
        : `resigned on behalf of an earlier run of this server (lease ${lease})`,
    );
    if (this.view.leader?.lease === lease) this.view = { ...this.view, leader: undefined };
    this.fresh = false;
  }

  /** etcd could not be asked (or did not answer). */
  failed(message: string, now: number): void {
    this.trouble = `cannot reach etcd: ${message}`;
    this.expire(now);
  }

  /** The time passes: a lease no longer surely alive is retired (and leadership with it). */
  tick(now: number): void {
    this.expire(now);
  }

  private expire(now: number): void {
    if (!this.lease || now < this.lease.validUntil - this.settings.marginMs) return;
    const id = this.lease.id;
    this.lease = undefined;
    this.retired.add(id);
    this.notes.push(`lease ${id} is no longer surely alive; it is retired (resigned and revoked once etcd answers)`);
  }

  /** Whether this server holds the leader key on its live lease (it leads, or is about to once its record is published). */
  private holdsKey(now: number): boolean {
    const key = this.view.leader;
    return (
      this.lease !== undefined &&
      now < this.lease.validUntil - this.settings.marginMs &&
      key !== undefined &&
      key.lease === this.lease.id &&
      key.server.name === this.settings.self.name
    );
  }

  /** Whether this server leads and may acknowledge writes now (fencing; invariant 6). */
  isLeader(now: number): boolean {
    return this.holdsKey(now) && this.ownsRecord();
  }

  /** Why this server may not acknowledge writes (when it may not). */
  whyNotLeader(now: number): string {
    if (!this.lease)
      return this.retired.size > 0 || this.trouble ? 'its lease in the coordinator lapsed' : 'it holds no lease in the coordinator yet';
    if (this.holdsKey(now)) return 'it won the election but has not yet published its synchronous set';
    const l = this.leader(now);
    return `the leader is ${l?.name ?? 'unknown'}`;
  }

  /**
   * The leader as last seen. A key naming this server counts only while this server leads:
   * a server that lost its lease names no leader rather than its stale self.
   */
  leader(now: number): LeaderInfo | undefined {
    const key = this.view.leader;
    if (!key || !this.isGenuine(key)) return undefined;
    if (key.server.name === this.settings.self.name && !this.isLeader(now)) return undefined;
    return { ...key.server, term: key.term };
  }

  /** The current lease, while it is surely alive (the one to keep alive). */
  currentLease(): string | undefined {
    return this.lease?.id;
  }

  /** Every lease this server still has to give up (retired and current), for a clean stop. */
  leases(): string[] {
    return [...this.retired, ...(this.lease ? [this.lease.id] : [])];
  }

  syncRecord(): SyncRecord | undefined {
    return this.view.sync?.record;
  }

  servers(): ServerInfo[] {
    return this.view.servers.map(({ name, address }) => ({ name, address })).sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * What keeps the datacenter from a leader as this server sees it: etcd out of reach, or no
   * leader key while this server may not campaign (invariant 4), naming who may. Without it a
   * datacenter whose last leader published an empty synchronous set and then went away shows
   * only "no leader is known" while every other server waits, correctly, for that leader.
   */
  problem(): string | undefined {
    if (this.trouble) return this.trouble;
    const sync = this.view.sync?.record;
    if (this.view.leader !== undefined || sync === undefined || this.mayCampaign()) return undefined;
    const may = [sync.leader, ...sync.members];
    return (
      `may not take over: the last leader, ${sync.leader}, published a synchronous set without this server ` +
      `(${sync.members.length > 0 ? sync.members.join(', ') : 'none'}); only ${may.join(' or ')} may lead next, ` +
      `as only ${may.length === 1 ? 'it holds' : 'they hold'} every write ${sync.leader} acknowledged`
    );
  }

  /** What happened since last asked, in words for the log. */
  takeNotes(): string[] {
    const n = this.notes;
    this.notes = [];
    return n;
  }
}

/**
 * A handover of the leader key (`watchword operator raft transfer-leader`), decided from what one
 * read of etcd saw: to `to`, or to the first member of the leader's synchronous set. Only a member
 * of that set may take it (it holds every write the leader acknowledged), so the handover deletes
 * the leader key and, in the same transaction, leaves a record naming `to` alone as the server
 * that may campaign (invariant 4): nobody else takes over meanwhile, the old leader included,
 * which steps down and follows once it reads the keys. Releases that know nothing of handovers
 * behave the same way, since they only read the keys.
 */
export type HandOver =
  | {
      ok: true;
      from: string;
      to: string;
      term: number;
      leaderRevision: string;
      syncRevision: string;
      record: SyncRecord;
    }
  | {
      ok: false;
      why: 'no-leader' | 'unknown-server' | 'not-in-sync-set' | 'already-leader';
      message: string;
    };

export function planHandOver(view: ElectionView, to: string | undefined): HandOver {
  const key = view.leader;
  const genuine = key && view.servers.some((s) => s.name === key.server.name && s.address === key.server.address && s.lease === key.lease);
  if (!key || !genuine)
    return { ok: false, why: 'no-leader', message: 'no leader holds the leader key now: there is nothing to hand over' };
  const from = key.server.name;
  const sync = view.sync;
  const owned = sync !== undefined && sync.record.leader === from && (sync.record.term === key.term || sync.revision === String(key.term));
  const members = owned ? sync.record.members : [];
  if (to !== undefined && to === from) return { ok: false, why: 'already-leader', message: `${from} already leads` };
  if (to !== undefined && !view.servers.some((s) => s.name === to))
    return { ok: false, why: 'unknown-server', message: `${JSON.stringify(to)} is not a registered server of this datacenter` };
  const target = to ?? members[0];
  if (target === undefined || !members.includes(target) || !sync)
    return {
      ok: false,
      why: 'not-in-sync-set',
      message:
        members.length === 0
          ? `${from}'s synchronous set is empty: no follower holds every write it acknowledged yet; try again once one ` +
            'has caught up (watchword operator servers)'
          : `${target} is not in ${from}'s synchronous set (${members.join(', ')}): only a member holds every write it acknowledged`,
    };
  return {
    ok: true,
    from,
    to: target,
    term: key.term,
    leaderRevision: key.revision ?? String(key.term),
    syncRevision: sync.revision,
    record: { leader: target, term: key.term, members: [] },
  };
}
