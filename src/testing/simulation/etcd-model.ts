import type { ElectionView, ServerInfo, SyncRecord } from '../../ha/election.js';
import type { ElectionClient } from '../../ha/etcd-client.js';
import { parseServer, parseSync } from '../../ha/etcd-client.js';

/**
 * etcd as the election uses it, in memory: keys with leases and revisions, leases with
 * deadlines, transactions that apply at one revision. The semantics the shell relies on:
 * a lease expires TTL after its last keep-alive, a restarted etcd gives every lease a fresh
 * TTL (as its lessor does when it is promoted), a key on a lease goes with it, and a down
 * etcd refuses every call.
 */
export class ModelEtcd {
  revision = 1;
  down = false;
  private nextLease = 100;
  /** Lease id -> expiry time and TTL, ms. */
  readonly leases = new Map<string, { expires: number; ttl: number }>();
  readonly keys = new Map<string, { value: string; lease: string; create: number; mod: number }>();

  constructor(private readonly defaultTTL = 5000) {}

  /** Refuses while down; drops the leases that ran out by `now`. */
  check(now: number): void {
    if (this.down) throw new Error('connection refused');
    for (const [id, l] of this.leases) if (l.expires <= now) this.dropLease(id);
  }

  private dropLease(id: string): void {
    this.leases.delete(id);
    for (const [k, v] of this.keys) if (v.lease === id) this.keys.delete(k);
  }

  /** A crash and a restart on the same data: leases get a fresh TTL. */
  restart(now: number): void {
    this.down = false;
    for (const l of this.leases.values()) l.expires = now + l.ttl;
  }

  grant(now: number, ttl = this.defaultTTL): string {
    this.check(now);
    const id = String(this.nextLease++);
    this.leases.set(id, { expires: now + ttl, ttl });
    return id;
  }

  /** The TTL left after a keep-alive, ms; 0 when the lease is gone. */
  keepalive(id: string, now: number): number {
    this.check(now);
    const l = this.leases.get(id);
    if (!l) return 0;
    l.expires = now + l.ttl;
    return l.ttl;
  }

  revoke(id: string, now: number): void {
    this.check(now);
    this.dropLease(id);
  }

  put(key: string, value: string, lease: string, now: number): number {
    return this.txn([[key, value, lease]], now);
  }

  /** Several puts in one transaction: one revision for all. */
  txn(puts: Array<[string, string, string]>, now: number): number {
    this.check(now);
    for (const [, , lease] of puts) if (lease !== '0' && !this.leases.has(lease)) throw new Error('etcdserver: requested lease not found');
    this.revision++;
    for (const [key, value, lease] of puts) {
      const old = this.keys.get(key);
      this.keys.set(key, { value, lease, create: old?.create ?? this.revision, mod: this.revision });
    }
    return this.revision;
  }

  del(key: string, now: number): void {
    this.check(now);
    this.revision++;
    this.keys.delete(key);
  }

  /** The election's keys (`leader`, `sync`, `servers/<name>`) as a read shows them. */
  view(now: number): ElectionView {
    this.check(now);
    const view: ElectionView = { servers: [] };
    for (const [k, v] of this.keys) {
      if (k === 'leader') view.leader = { server: parseServer(v.value), term: v.create, lease: v.lease, revision: String(v.mod) };
      else if (k === 'sync') view.sync = { record: parseSync(v.value), revision: String(v.mod) };
      else if (k.startsWith('servers/')) view.servers.push({ ...parseServer(v.value), lease: v.lease });
    }
    return view;
  }
}

/** What stands between a server and the model: its latency, and whether a call gets through. */
export interface EtcdLink {
  /** Time a call takes one way, ms. */
  delay(): number;
  /** Whether the server can reach etcd now (alive and not cut off). */
  reachable(): boolean;
  /** Whether this one message is lost on the way (a timed-out call). */
  lost(): boolean;
  now(): number;
}

/**
 * A server's election client against the model, each call a round trip through `link`: it
 * reaches etcd after the delay (applied then, if etcd is up and reachable) and answers after
 * another. A call that cannot get through fails after the delay, as a refused connection.
 */
export class ModelElectionClient implements ElectionClient {
  constructor(
    private readonly etcd: ModelEtcd,
    private readonly link: EtcdLink,
  ) {}

  private call<T>(op: (now: number) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      setTimeout(() => {
        if (!this.link.reachable() || this.link.lost()) return reject(new Error('connection refused'));
        let result: T;
        try {
          result = op(this.link.now());
        } catch (err) {
          return reject(err);
        }
        // The answer may be lost on the way back: the call then fails, though it was applied.
        setTimeout(
          () => (this.link.reachable() && !this.link.lost() ? resolve(result) : reject(new Error('deadline exceeded'))),
          this.link.delay(),
        );
      }, this.link.delay());
    });
  }

  grant(ttlSeconds: number): Promise<string> {
    return this.call((now) => this.etcd.grant(now, ttlSeconds * 1000));
  }

  keepalive(lease: string): Promise<number> {
    return this.call((now) => this.etcd.keepalive(lease, now));
  }

  revoke(lease: string): Promise<void> {
    return this.call((now) => this.etcd.revoke(lease, now));
  }

  read(): Promise<ElectionView> {
    return this.call((now) => this.etcd.view(now));
  }

  resign(lease: string): Promise<void> {
    return this.call((now) => {
      this.etcd.check(now);
      if (this.etcd.keys.get('leader')?.lease === lease) this.etcd.del('leader', now);
    });
  }

  clear(revision: string): Promise<void> {
    return this.call((now) => {
      this.etcd.check(now);
      if (String(this.etcd.keys.get('leader')?.mod) === revision) this.etcd.del('leader', now);
    });
  }

  register(self: ServerInfo, lease: string): Promise<void> {
    return this.call((now) => void this.etcd.put(`servers/${self.name}`, JSON.stringify(self), lease, now));
  }

  campaign(
    self: ServerInfo,
    lease: string,
    syncRevision: string | undefined,
    record: SyncRecord,
  ): Promise<{ won: boolean; revision: number }> {
    return this.call((now) => {
      this.etcd.check(now);
      const sync = this.etcd.keys.get('sync');
      const won = !this.etcd.keys.has('leader') && String(sync?.mod ?? 0) === String(syncRevision ?? 0) && this.etcd.leases.has(lease);
      if (!won) return { won: false, revision: this.etcd.revision };
      const revision = this.etcd.txn(
        [
          ['leader', JSON.stringify(self), lease],
          ['sync', JSON.stringify(record), '0'],
        ],
        now,
      );
      return { won: true, revision };
    });
  }

  publish(record: SyncRecord, lease: string): Promise<{ ok: boolean; revision: string }> {
    return this.call((now) => {
      this.etcd.check(now);
      if (this.etcd.keys.get('leader')?.lease !== lease) return { ok: false, revision: String(this.etcd.revision) };
      return { ok: true, revision: String(this.etcd.put('sync', JSON.stringify(record), '0', now)) };
    });
  }

  handOver(leaderRevision: string, syncRevision: string, record: SyncRecord): Promise<boolean> {
    return this.call((now) => {
      this.etcd.check(now);
      const leader = this.etcd.keys.get('leader');
      const sync = this.etcd.keys.get('sync');
      if (!leader || String(leader.mod) !== leaderRevision || String(sync?.mod ?? 0) !== syncRevision) return false;
      this.etcd.del('leader', now);
      this.etcd.put('sync', JSON.stringify(record), '0', now);
      return true;
    });
  }

  close(): void {}
}
