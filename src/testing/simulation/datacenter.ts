import { createHash } from 'node:crypto';
import FakeTimers from '@sinonjs/fake-timers';
import { pino } from 'pino';
import { EtcdCoordinator } from '../../ha/coordinator.js';
import { ServerGroup } from '../../ha/servers.js';
import type { ServerBatch } from '../../store/store.js';
import { Transport } from '../../transport/transport.js';
import { ModelElectionClient, ModelEtcd } from './etcd-model.js';
import { Random } from './random.js';
import { SimStore, tokenKey } from './sim-store.js';
import { type Link, type Network, type Server, SimFollower } from './sim-network.js';

/**
 * A whole datacenter in one process, from one seed (as TigerBeetle's VOPR and etcd/raft's
 * rafttest): the real election (election.ts with coordinator.ts's loop), the real leader and
 * its sessions (leader.ts, leader-session.ts, sync-set.ts), the real follower core
 * (follower-stream.ts) and group commit (store/group-commit.ts), over in-memory links, a model
 * of etcd and simulated disks, on a fake clock. A seeded schedule delays messages, cuts links
 * between servers and to etcd, kills and restarts servers and etcd, and writes all along.
 *
 * Checked as it runs and at the end:
 * 1. no acknowledged write is missing from a server when it starts to lead;
 * 2. at most one server acknowledges writes in each term;
 * 3. a follower applies only batches its leader wrote (never ahead of the leader's batch log);
 * 4. healed, the datacenter elects a leader and every server converges to it, holding every
 *    acknowledged write.
 */

export interface SimulationOptions {
  seed: number;
  /** Servers in the datacenter (default 3). */
  servers?: number;
  /** Simulated time with faults, ms (default 30 s); then everything is healed for `settleMs`. */
  durationMs?: number;
  settleMs?: number;
  /** Mean time between client writes, ms (default 25). */
  writeEveryMs?: number;
  /** Mean time between faults, ms (default 1500). */
  faultEveryMs?: number;
  /**
   * Tests of the checks themselves: half-way through, one acknowledged write is erased from
   * every follower's disk (as a lost write would be), which the run must report.
   */
  sabotage?: 'erase-acknowledged';
}

export interface SimulationResult {
  seed: number;
  failures: string[];
  writes: number;
  acknowledged: number;
  leaderships: number;
  faults: string[];
}

const LEASE_S = 2;
const logger = pino({ level: 'silent' });

const digest = (ops: ServerBatch['ops']): string => {
  const h = createHash('sha256');
  for (const [k, v] of ops) h.update(k).update(v ?? 'null');
  return h.digest('base64');
};

class Datacenter implements Network {
  readonly random: Random;
  readonly etcd = new ModelEtcd(LEASE_S * 1000);
  readonly servers: Server[] = [];
  readonly links = new Set<Link>();
  private readonly cut = new Set<string>();
  private readonly cutFromEtcd = new Set<string>();
  readonly failures: string[] = [];
  readonly faults: string[] = [];
  /** Acknowledged writes: ID -> server and term. */
  readonly acknowledged = new Map<string, { server: string; term: number }>();
  /** Who acknowledged writes in each term. */
  private readonly acknowledgers = new Map<number, string>();
  /** Every batch a leader handed to its followers: term:seq -> content. */
  private readonly written = new Map<string, string>();
  writes = 0;
  leaderships = 0;
  /** This seed's mix of faults (swarm testing: each seed weighs the kinds differently). */
  readonly swarm: Swarm;
  /**
   * Kills waiting for a moment in a leader's work rather than a time: just after it hands out
   * a batch (some followers get it, some do not: batch logs part), or while it sends a
   * follower a snapshot (the follower said where it stands; the leader dies before it is
   * told the rest). `server` undefined: whichever server leads then.
   */
  private traps: Trap[] = [];
  private heal: Heal = () => undefined;
  /** Everything healed: traps already sprung do not kill any more. */
  private settling = false;

  constructor(seed: number, count: number) {
    this.random = new Random(seed);
    this.swarm = new Swarm(this.random);
    for (let i = 1; i <= count; i++) {
      const server: Server = {
        name: `s${i}`,
        address: `s${i}:8500`,
        alive: true,
        incarnation: 0,
        store: undefined as unknown as SimStore,
        group: undefined,
      };
      server.store = this.storeFor(server, new Map());
      this.servers.push(server);
    }
  }

  /** One way across the network: mostly quick, sometimes slow. */
  delay(): number {
    return this.random.chance(0.05) ? 5 + this.random.int(60) : this.random.int(3);
  }

  fail(message: string): void {
    if (this.failures.length < 20) this.failures.push(`t=${Date.now()} ${message}`);
  }

  serverAt(address: string): Server | undefined {
    return this.servers.find((s) => s.address === address && s.alive);
  }

  reachable(a: Server, b: Server): boolean {
    return a.alive && b.alive && !this.cut.has(pair(a.name, b.name));
  }

  private storeFor(server: Server, saved: Map<string, Uint8Array>): SimStore {
    const incarnation = server.incarnation;
    const store = new SimStore({ delay: () => this.random.int(4), alive: () => server.alive && server.incarnation === incarnation }, saved);
    store.onApply = (batches) => {
      for (const b of batches) {
        const mine = this.written.get(`${b.term}:${b.seq}`);
        if (mine === undefined) this.fail(`${server.name} applied batch ${b.seq} of term ${b.term}, which no leader wrote`);
        else if (mine !== digest(b.ops))
          this.fail(`${server.name} applied batch ${b.seq} of term ${b.term} with other content than its leader wrote`);
      }
    };
    store.onInstall = (p) => {
      if (p.seq !== 0 && !this.written.has(`${p.term}:${p.seq}`))
        this.fail(`${server.name} installed a snapshot at batch ${p.seq} of term ${p.term}, which no leader wrote`);
    };
    return store;
  }

  /** Starts a server's process on what its disk holds. */
  start(server: Server): void {
    server.alive = true;
    server.incarnation++;
    server.store = this.storeFor(server, server.store.disk);
    const incarnation = server.incarnation;
    const up = () => server.alive && server.incarnation === incarnation;
    const client = new ModelElectionClient(this.etcd, {
      delay: () => 1 + this.random.int(4),
      reachable: () => up() && !this.cutFromEtcd.has(server.name),
      lost: () => this.random.chance(0.02),
      now: () => Date.now(),
    });
    const coordinator = new EtcdCoordinator({
      endpoints: [],
      datacenter: 'dc1',
      self: { name: server.name, address: server.address },
      leaseTTL: LEASE_S,
      pollMs: 100,
      client,
      logger,
    });
    const store = server.store;
    const replicating = store.setReplicator.bind(store);
    // Every batch a leader hands out is remembered, to check what followers apply.
    store.setReplicator = (r) =>
      replicating(
        r && {
          checkLeadership: () => r.checkLeadership(),
          term: () => r.term(),
          localWriteFailed: () => r.localWriteFailed(),
          replicate: (batch) => {
            this.written.set(`${batch.term}:${batch.seq}`, digest(batch.ops));
            const sent = r.replicate(batch);
            this.sprung(server, 'batch');
            return sent;
          },
        },
      );
    server.group = new ServerGroup(store, coordinator, {
      name: server.name,
      datacenter: 'dc1',
      address: () => server.address,
      transport: new Transport({ datacenter: 'dc1', tls: undefined, serverKey: undefined, logger }),
      syncFollowers: 1,
      syncTimeoutMs: 600,
      leaseMs: LEASE_S * 1000,
      heartbeatMs: 200,
      deadPeerMs: 1200,
      backoffMinMs: 50,
      backoffMaxMs: 400,
      tailBatches: 200,
      logger,
      onLead: async (term) => {
        if (!up()) return;
        this.leaderships++;
        const held = store.tokens();
        const missing = [...this.acknowledged.keys()].filter((id) => !held.has(id));
        if (missing.length > 0) {
          const first = this.acknowledged.get(missing[0] as string);
          this.fail(
            `${server.name} leads term ${term} without ${missing.length} acknowledged write(s), e.g. ${missing[0]} (acknowledged by ` +
              `${first?.server} in term ${first?.term})`,
          );
        }
      },
      onFollow: async () => undefined,
      follower: (s, options) => new SimFollower(this, server, s, options),
    });
    void server.group.start().catch(() => undefined);
  }

  /** A crash: nothing more leaves the process; what is on its disk stays. */
  kill(server: Server): void {
    server.alive = false;
    for (const l of [...this.links]) if (l.follower === server || l.leader === server) this.closeLink(l, `${server.name} died`);
    // The dead process's timers stop with it (its calls could not get out anyway).
    void server.group?.stop().catch(() => undefined);
    server.group = undefined;
  }

  private closeLink(link: Link, reason: string): void {
    this.links.delete(link);
    link.close(reason);
  }

  /** `server`, leading, reached the moment `on`: springs the first trap set for it. */
  sprung(server: Server, on: Trap['on']): void {
    const i = this.traps.findIndex((t) => t.on === on && (t.server ?? server) === server);
    if (i < 0) return;
    const [trap] = this.traps.splice(i, 1) as [Trap];
    const incarnation = server.incarnation;
    setTimeout(() => {
      if (this.settling || !server.alive || server.incarnation !== incarnation) return;
      this.faults.push(`t=${Date.now()} kill ${server.name} ${trap.afterMs} ms after ${on === 'batch' ? 'a batch' : 'a snapshot began'}`);
      this.kill(server);
      this.heal(300 + this.random.int(3000), () => this.start(server));
    }, trap.afterMs);
  }

  /** A client's write at a server, acknowledged only by a leader. */
  write(): void {
    const alive = this.servers.filter((s) => s.alive && s.group?.isLeader());
    const server = alive[this.random.int(alive.length)];
    if (!server) return;
    const id = `w${++this.writes}`;
    server.store.write(id).then(
      ({ term }) => {
        this.acknowledged.set(id, { server: server.name, term });
        const other = this.acknowledgers.get(term);
        if (other !== undefined && other !== server.name)
          this.fail(`two servers acknowledged writes in term ${term}: ${other} and ${server.name}`);
        this.acknowledgers.set(term, server.name);
      },
      () => undefined,
    );
  }

  /** One fault from the seed's schedule, healed after a while. */
  fault(heal: Heal): void {
    this.heal = heal;
    const r = this.random;
    const alive = this.servers.filter((s) => s.alive);
    const pick = <T>(list: T[]): T => list[r.int(list.length)] as T;
    switch (this.swarm.pick(r)) {
      case 0: {
        if (alive.length < 2) return;
        // Most often the leader: that is where the acknowledged writes are at stake.
        const leader = alive.find((s) => s.group?.isLeader());
        const victim = leader && r.chance(0.6) ? leader : pick(alive);
        this.faults.push(`t=${Date.now()} kill ${victim.name}`);
        this.kill(victim);
        heal(500 + r.int(4000), () => this.start(victim));
        return;
      }
      case 1: {
        if (this.etcd.down) return;
        this.faults.push(`t=${Date.now()} etcd down`);
        this.etcd.down = true;
        heal(300 + r.int(4000), () => this.etcd.restart(Date.now()));
        return;
      }
      case 2: {
        const s = pick(this.servers);
        if (this.cutFromEtcd.has(s.name)) return;
        this.faults.push(`t=${Date.now()} cut ${s.name} from etcd`);
        this.cutFromEtcd.add(s.name);
        heal(300 + r.int(4000), () => this.cutFromEtcd.delete(s.name));
        return;
      }
      case 3: {
        const a = pick(this.servers);
        const b = pick(this.servers.filter((s) => s !== a));
        const key = pair(a.name, b.name);
        if (this.cut.has(key)) return;
        this.faults.push(`t=${Date.now()} cut ${key}`);
        this.cut.add(key);
        for (const l of [...this.links]) if (pair(l.follower.name, l.leader.name) === key) this.closeLink(l, `link ${key} cut`);
        heal(200 + r.int(3000), () => this.cut.delete(key));
        return;
      }
      case 4: {
        // A leader lost, then etcd lost while the next one takes over.
        const leader = alive.find((s) => s.group?.isLeader());
        if (!leader || alive.length < 2 || this.etcd.down) return;
        this.faults.push(`t=${Date.now()} kill ${leader.name}, then etcd down`);
        this.kill(leader);
        heal(300 + r.int(3000), () => this.start(leader));
        heal(this.swarm.failoverMs + r.int(200), () => {
          if (this.etcd.down) return;
          this.faults.push(`t=${Date.now()} etcd down`);
          this.etcd.down = true;
          heal(500 + r.int(4000), () => this.etcd.restart(Date.now()));
        });
        return;
      }
      case 5: {
        // The leader dies just after it hands out its next batch; sometimes the next leader
        // too, once it starts sending a snapshot to a follower whose batch log parted.
        const leader = alive.find((s) => s.group?.isLeader());
        if (!leader || alive.length < 2) return;
        this.faults.push(`t=${Date.now()} trap: kill ${leader.name} after its next batch`);
        this.traps.push({ server: leader, on: 'batch', afterMs: r.int(4) });
        if (r.chance(0.5)) {
          this.faults.push(`t=${Date.now()} trap: kill the next leader to start a snapshot`);
          this.traps.push({ server: undefined, on: 'snapshot', afterMs: r.int(12) });
        }
        return;
      }
      case 6: {
        this.faults.push(`t=${Date.now()} trap: kill the next leader to start a snapshot`);
        this.traps.push({ server: undefined, on: 'snapshot', afterMs: r.int(12) });
        return;
      }
      default: {
        // A burst of writes.
        for (let i = 0; i < 20; i++) this.write();
      }
    }
  }

  /** Erases one acknowledged write from every follower's disk (tests of the checks); false until there is one. */
  sabotage(): boolean {
    const [id] = this.acknowledged.keys();
    if (id === undefined) return false;
    for (const s of this.servers) if (s.alive && !s.group?.isLeader()) s.store.disk.delete(tokenKey(id));
    this.faults.push(`t=${Date.now()} erased ${id} from the followers (sabotage)`);
    return true;
  }

  /** Everything healed: no cuts, every server up, etcd up. */
  healAll(): void {
    this.traps = [];
    this.settling = true;
    this.cut.clear();
    this.cutFromEtcd.clear();
    if (this.etcd.down) this.etcd.restart(Date.now());
    for (const s of this.servers) if (!s.alive) this.start(s);
  }

  /** Where a server stands, for a failure's message. */
  private describe(s: Server): string {
    const p = s.store.serverPosition();
    const f = s.group?.followerStatus();
    const stream = f ? ` following ${f.Leader} (connected ${f.Connected}, leader at ${f.LeaderSeq}, last error "${f.LastError}")` : '';
    return `${s.name} at batch ${p.seq} of term ${p.term}${stream}`;
  }

  /** The end: one leader, and every server holding exactly what it holds, every acknowledged write with it. */
  converged(): string | undefined {
    const leaders = this.servers.filter((s) => s.group?.isLeader());
    if (leaders.length !== 1) return `${leaders.length} leaders after healing`;
    const leader = leaders[0] as Server;
    const held = leader.store.tokens();
    const missing = [...this.acknowledged.keys()].filter((id) => !held.has(id));
    if (missing.length > 0) return `the final leader ${leader.name} lacks ${missing.length} acknowledged write(s), e.g. ${missing[0]}`;
    for (const s of this.servers) {
      if (s === leader) continue;
      const theirs = s.store.tokens();
      if (theirs.size !== held.size || [...held].some((id) => !theirs.has(id)))
        return `${s.name} holds ${theirs.size} tokens, the leader ${held.size}; ${this.describe(s)}, leader ${this.describe(leader)}`;
    }
    return undefined;
  }
}

/** The weights of the fault kinds for one seed, and how soon after a failover etcd goes down. */
class Swarm {
  private readonly weights: number[];
  readonly failoverMs: number;

  constructor(r: Random) {
    // kill, etcd down, cut from etcd, cut between servers, leader then etcd, kill after a
    // batch, kill during a snapshot, write burst.
    this.weights = [0, 1, 2, 3, 4, 5, 6, 7].map(() => (r.chance(0.25) ? 0 : r.next()));
    this.failoverMs = 1800 + r.int(800);
  }

  pick(r: Random): number {
    const total = this.weights.reduce((a, b) => a + b, 0);
    if (total === 0) return 7;
    let x = r.next() * total;
    for (let i = 0; i < this.weights.length; i++) {
      x -= this.weights[i] as number;
      if (x < 0) return i;
    }
    return 7;
  }
}

type Heal = (after: number, what: () => void) => void;

interface Trap {
  server: Server | undefined;
  on: 'batch' | 'snapshot';
  afterMs: number;
}

const pair = (a: string, b: string): string => (a < b ? `${a}|${b}` : `${b}|${a}`);

/** Runs one seed. Deterministic: the same seed gives the same run. */
export async function simulate(options: SimulationOptions): Promise<SimulationResult> {
  const { seed, servers = 3, durationMs = 30_000, settleMs = 15_000, writeEveryMs = 25, faultEveryMs = 1500 } = options;
  const clock = FakeTimers.withGlobal(globalThis).install({
    now: 1_000_000,
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'Date'],
    loopLimit: 10_000_000,
  });
  const random = Math.random;
  const dc = new Datacenter(seed, servers);
  Math.random = () => dc.random.next();
  try {
    for (const s of dc.servers) dc.start(s);
    const heals: Array<{ at: number; what: () => void }> = [];
    const end = Date.now() + durationMs;
    let nextWrite = Date.now();
    let nextFault = Date.now() + 2000;
    let sabotaged = options.sabotage === undefined;
    while (Date.now() < end) {
      if (!sabotaged && Date.now() >= end - durationMs / 2) sabotaged = dc.sabotage();
      if (Date.now() >= nextWrite) {
        dc.write();
        nextWrite = Date.now() + 1 + dc.random.int(2 * writeEveryMs);
      }
      if (Date.now() >= nextFault) {
        dc.fault((after, what) => heals.push({ at: Date.now() + after, what }));
        nextFault = Date.now() + 100 + dc.random.int(2 * faultEveryMs);
      }
      for (const h of heals.filter((x) => x.at <= Date.now())) {
        heals.splice(heals.indexOf(h), 1);
        h.what();
      }
      await clock.tickAsync(5);
    }
    dc.healAll();
    heals.length = 0;
    let outcome: string | undefined = 'not settled';
    for (const until = Date.now() + settleMs; Date.now() < until; ) {
      await clock.tickAsync(250);
      outcome = dc.converged();
      if (outcome === undefined) break;
    }
    if (outcome !== undefined) dc.fail(`not converged ${settleMs / 1000} s after healing: ${outcome}`);
    for (const s of dc.servers) dc.kill(s);
    await clock.tickAsync(5_000);
    return {
      seed,
      failures: dc.failures,
      writes: dc.writes,
      acknowledged: dc.acknowledged.size,
      leaderships: dc.leaderships,
      faults: dc.faults,
    };
  } finally {
    Math.random = random;
    clock.uninstall();
  }
}
