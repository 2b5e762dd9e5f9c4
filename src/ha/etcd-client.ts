import type { Etcd3, Lease } from 'etcd3';
import { isPeerAddress } from '../transport/transport.js';
import type { ElectionView, ServerInfo, SyncRecord } from './election.js';

/**
 * The calls the election makes of etcd, one round trip each, with the keys of one datacenter:
 * a lease per server, a leader key created only if absent and bound to the leader's lease
 * (its create revision is the term), a sync key naming the synchronous set, and a
 * registration per server. The shell (coordinator.ts) runs them; etcd3 does them here, and
 * the simulation (testing/simulation) against its model of etcd.
 */
export interface ElectionClient {
  /** A new lease of `ttlSeconds`. */
  grant(ttlSeconds: number): Promise<string>;
  /** Keeps `lease` alive: the time it has left, ms (0: etcd no longer knows it). */
  keepalive(lease: string): Promise<number>;
  /** Revokes `lease` (and every key on it); one etcd no longer knows counts as revoked. */
  revoke(lease: string): Promise<void>;
  /** Every key of the election. */
  read(): Promise<ElectionView>;
  /** Deletes the leader key if it is on `lease`. */
  resign(lease: string): Promise<void>;
  /** Deletes the leader key if it is still at mod revision `revision`. */
  clear(revision: string): Promise<void>;
  /** Puts this server's registration on `lease`. */
  register(self: ServerInfo, lease: string): Promise<void>;
  /**
   * Creates the leader key on `lease` (if absent and the sync key is at `syncRevision`) and, in
   * the same transaction, the record `record`; the revision is the new term.
   */
  campaign(
    self: ServerInfo,
    lease: string,
    syncRevision: string | undefined,
    record: SyncRecord,
  ): Promise<{ won: boolean; revision: number }>;
  /** Puts the synchronous-set record if the leader key is on `lease`. */
  publish(record: SyncRecord, lease: string): Promise<{ ok: boolean; revision: string }>;
  /**
   * A handover (election.ts, planHandOver): deletes the leader key and puts `record` in one
   * transaction, if the leader key is still at mod revision `leaderRevision` and the sync key at
   * `syncRevision`; false when either moved meanwhile.
   */
  handOver(leaderRevision: string, syncRevision: string, record: SyncRecord): Promise<boolean>;
  close(): void;
}

/** Per-call deadline for etcd, ms: a call that hangs must not hold the loop past a lease. */
export const CALL_MS = 2000;

export interface Etcd3ClientOptions {
  endpoints: string[];
  datacenter: string;
  credentials?: { rootCertificate?: Buffer; certChain?: Buffer; privateKey?: Buffer };
  auth?: { username: string; password: string };
}

/** The election's calls through the etcd3 client (gRPC). */
export class Etcd3ElectionClient implements ElectionClient {
  /** The client-side lease object of each lease granted, for keep-alives. */
  private readonly leases = new Map<string, Lease>();
  private readonly prefix: string;

  private constructor(
    private readonly client: Etcd3,
    datacenter: string,
  ) {
    this.prefix = `/watchword/${datacenter}/`;
  }

  /** Loaded on first use: the etcd client (gRPC) costs a quarter of a second to load, which no other command should pay. */
  static async connect(options: Etcd3ClientOptions): Promise<Etcd3ElectionClient> {
    const [{ Etcd3 }, { noop }] = await Promise.all([import('etcd3'), import('cockatiel')]);
    const client = new Etcd3({
      hosts: options.endpoints,
      // Without a CA of its own, grpc checks etcd's certificate against the system's roots.
      ...(options.credentials ? { credentials: options.credentials as { rootCertificate: Buffer } } : {}),
      ...(options.auth ? { auth: options.auth } : {}),
      dialTimeout: CALL_MS,
      defaultCallOptions: () => ({ deadline: Date.now() + CALL_MS }),
      // Calls fail fast and are retried by the election loop, not held behind a circuit breaker.
      faultHandling: { host: () => noop, global: noop },
    });
    return new Etcd3ElectionClient(client, options.datacenter);
  }

  private key(name: string): string {
    return this.prefix + name;
  }

  async grant(ttlSeconds: number): Promise<string> {
    const lease = this.client.lease(ttlSeconds, { autoKeepAlive: false });
    lease.on('lost', () => undefined);
    const id = await lease.grant();
    this.leases.set(id, lease);
    return id;
  }

  async keepalive(id: string): Promise<number> {
    const lease = this.leases.get(id);
    if (!lease) return 0;
    const res = await lease.keepaliveOnce({ deadline: Date.now() + 1500 });
    return Number(res.TTL) * 1000;
  }

  async revoke(id: string): Promise<void> {
    const lease = this.leases.get(id);
    this.leases.delete(id);
    lease?.release();
    try {
      await this.client.leaseClient.leaseRevoke({ ID: id });
    } catch (err) {
      if (!/lease not found/i.test(messageOf(err))) throw err;
    }
  }

  async read(): Promise<ElectionView> {
    const res = await this.client.getAll().prefix(this.prefix).exec();
    const view: ElectionView = { servers: [] };
    for (const kv of res.kvs) {
      const k = kv.key.toString();
      const lease = String(kv.lease);
      if (k === this.key('leader'))
        view.leader = { server: parseServer(kv.value), term: Number(kv.create_revision), lease, revision: String(kv.mod_revision) };
      else if (k === this.key('sync')) view.sync = { record: parseSync(kv.value), revision: String(kv.mod_revision) };
      else if (k.startsWith(this.key('servers/'))) view.servers.push({ ...parseServer(kv.value), lease });
    }
    return view;
  }

  async resign(lease: string): Promise<void> {
    await this.client
      .if(this.key('leader'), 'Lease', '==', lease)
      .then(this.client.delete().key(this.key('leader')))
      .commit();
  }

  async clear(revision: string): Promise<void> {
    await this.client
      .if(this.key('leader'), 'Mod', '==', revision)
      .then(this.client.delete().key(this.key('leader')))
      .commit();
  }

  async register(self: ServerInfo, lease: string): Promise<void> {
    await this.client
      .put(this.key(`servers/${self.name}`))
      .value(JSON.stringify(self))
      .lease(lease);
  }

  async campaign(
    self: ServerInfo,
    lease: string,
    syncRevision: string | undefined,
    record: SyncRecord,
  ): Promise<{ won: boolean; revision: number }> {
    const res = await this.client
      .if(this.key('leader'), 'Create', '==', 0)
      .and(this.key('sync'), 'Mod', '==', syncRevision ?? 0)
      .then(
        this.client.put(this.key('leader')).value(JSON.stringify(self)).lease(lease),
        this.client.put(this.key('sync')).value(JSON.stringify(record)),
      )
      .commit();
    return { won: res.succeeded, revision: Number(res.header.revision) };
  }

  async publish(record: SyncRecord, lease: string): Promise<{ ok: boolean; revision: string }> {
    const res = await this.client
      .if(this.key('leader'), 'Lease', '==', lease)
      .then(this.client.put(this.key('sync')).value(JSON.stringify(record)))
      .commit();
    return { ok: res.succeeded, revision: String(res.header.revision) };
  }

  async handOver(leaderRevision: string, syncRevision: string, record: SyncRecord): Promise<boolean> {
    const res = await this.client
      .if(this.key('leader'), 'Mod', '==', leaderRevision)
      .and(this.key('sync'), 'Mod', '==', syncRevision)
      .then(this.client.delete().key(this.key('leader')), this.client.put(this.key('sync')).value(JSON.stringify(record)))
      .commit();
    return res.succeeded;
  }

  close(): void {
    this.client.close();
  }
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

const NOBODY: ServerInfo = { name: '', address: '' };

/**
 * A server's registration or the leader key's value; what does not parse names nobody (and is
 * then no leader). etcd is not trusted with what reaches a URL or a header: the name is a node
 * name (printable, no spaces) and the address a plain HOST:PORT, or the record names nobody.
 */
export function parseServer(value: Buffer | string): ServerInfo {
  try {
    const v = JSON.parse(value.toString()) as Partial<ServerInfo>;
    if (typeof v.name !== 'string' || !/^[\x21-\x7e]{1,128}$/.test(v.name)) return NOBODY;
    if (typeof v.address !== 'string' || !isPeerAddress(v.address)) return NOBODY;
    return { name: v.name, address: v.address };
  } catch {
    return NOBODY;
  }
}

/**
 * The synchronous set. One that does not parse names nobody: no server may take over until
 * an operator repairs it, which is safer than letting a server that may lack acknowledged
 * writes lead.
 */
export function parseSync(value: Buffer | string): SyncRecord {
  try {
    const v = JSON.parse(value.toString()) as Partial<SyncRecord>;
    return {
      leader: typeof v.leader === 'string' ? v.leader : '',
      term: Number(v.term) || 0,
      members: Array.isArray(v.members) ? v.members.filter((m): m is string => typeof m === 'string') : [],
    };
  } catch {
    return { leader: '', term: 0, members: [] };
  }
}
