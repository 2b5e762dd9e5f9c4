import { describe, expect, it } from 'vitest';
import { Election, type EtcdStep, type ServerInfo } from '../../src/ha/election.js';
import { ModelEtcd as SharedModelEtcd } from '../../src/testing/simulation/etcd-model.js';

/** The simulation's model of etcd, with this file's lease time. */
class ModelEtcd extends SharedModelEtcd {
  constructor() {
    super(LEASE);
  }
}

// The election's decisions without etcd: every transition fed by hand on a manual clock,
// and whole scenarios run against a small model of etcd's keys, leases and transactions
// (the semantics the shell relies on: a lease expires TTL after its last keep-alive, a
// restarted etcd gives every lease a fresh TTL, a key on a lease goes with it).

const LEASE = 5000;
const MARGIN = 1000;
const server = (name: string): ServerInfo => ({ name, address: `${name}:8500` });
const make = (name = 'p1') => new Election({ self: server(name), leaseMs: LEASE, marginMs: MARGIN });

/** What the shell does with a step, against the model. */
function perform(e: Election, self: ServerInfo, etcd: ModelEtcd, step: Exclude<EtcdStep, { kind: 'idle' }>, now: number): void {
  switch (step.kind) {
    case 'resign':
      etcd.view(now);
      if (etcd.keys.get('leader')?.lease === step.lease) etcd.del('leader', now);
      etcd.revoke(step.lease, now);
      return e.resigned(step.lease);
    case 'grant':
      return e.granted(etcd.grant(now), now);
    case 'clear':
      etcd.view(now);
      if (String(etcd.keys.get('leader')?.mod) === step.revision) etcd.del('leader', now);
      return e.cleared();
    case 'read':
      return e.observed(etcd.view(now), now);
    case 'register':
      etcd.put(`servers/${self.name}`, JSON.stringify(self), step.lease, now);
      return e.registered(step.lease);
    case 'campaign': {
      etcd.view(now);
      const sync = etcd.keys.get('sync');
      const won = !etcd.keys.has('leader') && String(sync?.mod ?? 0) === String(step.syncRevision ?? 0);
      // The key and a record naming the winner, in one transaction (as the shell does).
      const term = won
        ? etcd.txn(
            [
              ['leader', JSON.stringify(self), step.lease],
              ['sync', JSON.stringify({ leader: self.name, term: 0, members: [] }), '0'],
            ],
            now,
          )
        : etcd.revision;
      e.campaigned(step.lease, won, term);
      return;
    }
    case 'claim': {
      etcd.view(now);
      if (etcd.keys.get('leader')?.lease !== step.lease) return e.beginRound(now);
      const record = { leader: self.name, term: step.term, members: [] };
      return e.syncPublished(record, String(etcd.put('sync', JSON.stringify(record), '0', now)));
    }
  }
}

/** One round of the shell's loop; a failing call ends it, as in the shell. */
function round(e: Election, self: ServerInfo, etcd: ModelEtcd, now: number): EtcdStep['kind'][] {
  const done: EtcdStep['kind'][] = [];
  e.beginRound(now);
  try {
    for (let i = 0; i < 10; i++) {
      const step = e.next(now);
      done.push(step.kind);
      if (step.kind === 'idle') break;
      perform(e, self, etcd, step, now);
    }
  } catch (err) {
    e.failed((err as Error).message, now);
  }
  return done;
}

function keepalive(e: Election, etcd: ModelEtcd, now: number): void {
  const id = e.currentLease();
  if (id !== undefined) {
    try {
      e.keptAlive(id, now, etcd.keepalive(id, now));
    } catch (err) {
      e.failed((err as Error).message, now);
    }
  }
  e.tick(now);
}

describe('Election (the coordinator’s decisions, without etcd)', () => {
  it('takes a lease, registers, campaigns on an empty election and leads in the term of its key', () => {
    const etcd = new ModelEtcd();
    const e = make();
    expect(round(e, server('p1'), etcd, 0)).toEqual(['grant', 'read', 'register', 'campaign', 'idle']);
    expect(e.isLeader(0)).toBe(true);
    expect(e.leader(0)).toEqual({ ...server('p1'), term: etcd.keys.get('leader')?.create });
    expect(e.syncRecord()).toEqual({ leader: 'p1', term: etcd.keys.get('leader')?.create, members: [] });
    expect(e.servers()).toEqual([server('p1')]);
    expect(e.takeNotes()).toEqual([expect.stringMatching(/won the election in term \d+/)]);
    // Nothing more to do while all is well.
    expect(round(e, server('p1'), etcd, 250)).toEqual(['read', 'idle']);
  });

  it('keeps leading while keep-alives are confirmed, and stops a margin before a lease without them could end', () => {
    const etcd = new ModelEtcd();
    const e = make();
    round(e, server('p1'), etcd, 0);
    for (let t = 1000; t <= 20_000; t += 1000) keepalive(e, etcd, t);
    expect(e.isLeader(20_000)).toBe(true);
    // The last confirmed keep-alive was sent at 20 s: leadership ends at 20 + 5 - 1 s.
    expect(e.isLeader(23_999)).toBe(true);
    expect(e.isLeader(24_000)).toBe(false);
    expect(() => e.tick(24_000)).not.toThrow();
    expect(e.currentLease()).toBeUndefined();
    expect(e.whyNotLeader(24_000)).toBe('its lease in the coordinator lapsed');
  });

  it('a short etcd outage (shorter than the lease less the margin) changes nothing: same lease, same term', () => {
    const etcd = new ModelEtcd();
    const e = make();
    round(e, server('p1'), etcd, 0);
    const term = e.leader(0)?.term;
    const lease = e.currentLease();
    keepalive(e, etcd, 1000);
    etcd.down = true;
    keepalive(e, etcd, 2000);
    round(e, server('p1'), etcd, 2500);
    expect(e.problem()).toBe('cannot reach etcd: connection refused');
    expect(e.isLeader(3000)).toBe(true);
    etcd.restart(3500);
    keepalive(e, etcd, 3600);
    expect(round(e, server('p1'), etcd, 3700)).toEqual(['read', 'idle']);
    expect(e.isLeader(7500)).toBe(true);
    expect(e.currentLease()).toBe(lease);
    expect(e.leader(7500)?.term).toBe(term);
    expect(e.problem()).toBeUndefined();
  });

  it('after an etcd restart that kept its lease and key, a leader that lapsed resigns (key deleted, lease revoked) and leads again in a new term', () => {
    const etcd = new ModelEtcd();
    const e = make();
    round(e, server('p1'), etcd, 0);
    const oldTerm = e.leader(0)?.term as number;
    const oldLease = e.currentLease() as string;
    keepalive(e, etcd, 1000);
    etcd.down = true; // SIGKILL
    for (let t = 2000; t <= 5000; t += 1000) keepalive(e, etcd, t);
    expect(e.isLeader(5000)).toBe(false); // 1 s + 5 s - 1 s
    expect(e.leader(5000)).toBeUndefined(); // not its stale self
    expect(e.leases()).toEqual([oldLease]);
    etcd.restart(5000); // back on the same data dir: the lease and the key survived
    expect(etcd.keys.get('leader')?.lease).toBe(oldLease);
    keepalive(e, etcd, 5100); // the retired lease is never kept alive again
    expect(etcd.leases.get(oldLease)?.expires).toBe(5000 + LEASE);
    expect(round(e, server('p1'), etcd, 5200)).toEqual(['resign', 'grant', 'read', 'register', 'campaign', 'idle']);
    expect(etcd.leases.has(oldLease)).toBe(false);
    expect(e.isLeader(5200)).toBe(true);
    expect(e.leader(5200)?.term).toBeGreaterThan(oldTerm);
    expect(e.takeNotes().join('\n')).toMatch(
      /lease \d+ is no longer surely alive[\s\S]*resigned: the leader key is off lease \d+, which is revoked[\s\S]*won the election/,
    );
  });

  it('a retired lease is resigned even when etcd expired it meanwhile (revoke of a lease etcd no longer knows is done)', () => {
    const etcd = new ModelEtcd();
    const e = make();
    round(e, server('p1'), etcd, 0);
    etcd.down = true;
    keepalive(e, etcd, 4500);
    expect(e.isLeader(4500)).toBe(false);
    etcd.down = false; // back, but no restart: the lease runs out at 5 s
    expect(round(e, server('p1'), etcd, 6000)).toEqual(['resign', 'grant', 'read', 'register', 'campaign', 'idle']);
    expect(e.isLeader(6000)).toBe(true);
  });

  it('etcd saying the lease expired ends leadership at once; the next round takes a new lease', () => {
    const etcd = new ModelEtcd();
    const e = make();
    round(e, server('p1'), etcd, 0);
    e.keptAlive(e.currentLease() as string, 1000, 0);
    expect(e.isLeader(1000)).toBe(false);
    expect(e.problem()).toBe('found its lease expired in etcd');
    expect(e.leases()).toEqual([]); // nothing to revoke: etcd dropped it and its keys
  });

  it('follows a leader key held by another server, and does not campaign', () => {
    const etcd = new ModelEtcd();
    const p2 = make('p2');
    round(p2, server('p2'), etcd, 0);
    const e = make('p1');
    expect(round(e, server('p1'), etcd, 10)).toEqual(['grant', 'read', 'register', 'idle']);
    expect(e.isLeader(10)).toBe(false);
    expect(e.leader(10)?.name).toBe('p2');
    expect(e.whyNotLeader(10)).toBe('the leader is p2');
    expect(e.servers().map((s) => s.name)).toEqual(['p1', 'p2']);
  });

  it('a leader key naming this server on a lease it does not hold (an earlier run of it) is resigned on that run’s behalf', () => {
    const etcd = new ModelEtcd();
    const before = make('p1');
    round(before, server('p1'), etcd, 0);
    const oldTerm = before.leader(0)?.term as number;
    // p1 restarts: the new process knows nothing of the old lease, which is still alive.
    const e = make('p1');
    expect(round(e, server('p1'), etcd, 500)).toEqual(['grant', 'read', 'resign', 'read', 'register', 'campaign', 'idle']);
    expect(e.isLeader(500)).toBe(true);
    expect(e.leader(500)?.term).toBeGreaterThan(oldTerm);
    expect(e.takeNotes()[0]).toMatch(/on behalf of an earlier run/);
  });

  it('with the leader key missing, campaigns only as the previous leader or a member of its synchronous set', () => {
    const etcd = new ModelEtcd();
    etcd.put('sync', JSON.stringify({ leader: 'p1', term: 3, members: ['p2'] }), '0', 0);
    const p3 = make('p3');
    expect(round(p3, server('p3'), etcd, 0)).toEqual(['grant', 'read', 'register', 'idle']);
    expect(p3.leader(0)).toBeUndefined();
    // It says why it waits, and for whom.
    expect(p3.problem()).toBe(
      'may not take over: the last leader, p1, published a synchronous set without this server (p2); ' +
        'only p1 or p2 may lead next, as only they hold every write p1 acknowledged',
    );
    // Logged once, not at every round.
    expect(p3.takeNotes().filter((n) => n.startsWith('no leader, and this server may not take over'))).toHaveLength(1);
    round(p3, server('p3'), etcd, 0);
    expect(p3.takeNotes().filter((n) => n.startsWith('no leader'))).toEqual([]);
    const p2 = make('p2');
    expect(p2.problem()).toBeUndefined();
    expect(round(p2, server('p2'), etcd, 0)).toContain('campaign');
    expect(p2.isLeader(0)).toBe(true);
    expect(p2.problem()).toBeUndefined();
    // Once p2 leads, p3 follows it and has nothing to report.
    round(p3, server('p3'), etcd, 0);
    expect(p3.leader(0)?.name).toBe('p2');
    expect(p3.problem()).toBeUndefined();
  });

  it('names the last leader alone when its synchronous set was empty', () => {
    const etcd = new ModelEtcd();
    etcd.put('sync', JSON.stringify({ leader: 'p1', term: 3, members: [] }), '0', 0);
    const p2 = make('p2');
    expect(round(p2, server('p2'), etcd, 0)).toEqual(['grant', 'read', 'register', 'idle']);
    expect(p2.problem()).toBe(
      'may not take over: the last leader, p1, published a synchronous set without this server (none); ' +
        'only p1 may lead next, as only it holds every write p1 acknowledged',
    );
  });

  it('a campaign lost to a quicker server reads again and follows the winner', () => {
    const etcd = new ModelEtcd();
    const e = make('p1');
    e.granted(etcd.grant(0), 0);
    e.observed(etcd.view(0), 0);
    e.registered(e.currentLease() as string);
    const step = e.next(0);
    expect(step.kind).toBe('campaign');
    round(make('p2'), server('p2'), etcd, 0); // p2 takes the key first
    perform(e, server('p1'), etcd, step as Exclude<EtcdStep, { kind: 'idle' }>, 0);
    expect(e.isLeader(0)).toBe(false);
    expect(e.next(0)).toEqual({ kind: 'read' });
    round(e, server('p1'), etcd, 10);
    expect(e.leader(10)?.name).toBe('p2');
  });

  it('cut from etcd past the fencing deadline: stops leading before its lease could end, names no leader, says why; its synchronous follower takes over', () => {
    const etcd = new ModelEtcd();
    const e = make();
    const f = make('p2');
    round(e, server('p1'), etcd, 0);
    round(f, server('p2'), etcd, 0);
    // p1 publishes p2 as its synchronous set (as the leader does once p2 caught up).
    const record = { leader: 'p1', term: e.leader(0)?.term as number, members: ['p2'] };
    e.syncPublished(record, String(etcd.put('sync', JSON.stringify(record), '0', 0)));
    keepalive(e, etcd, 1000);
    // Only p1 is cut: its calls fail; etcd and p2 go on.
    const cut = new ModelEtcd();
    cut.down = true;
    let p2LeadsAt = 0;
    for (let t = 1100; t <= 12_000; t += 100) {
      if (t % 1000 === 0) {
        keepalive(e, cut, t);
        keepalive(f, etcd, t);
      }
      if (t % 250 === 0) {
        round(e, server('p1'), cut, t);
        round(f, server('p2'), etcd, t);
      }
      // Never two leaders, and p1 stops before etcd could let its lease go.
      expect(e.isLeader(t) && f.isLeader(t)).toBe(false);
      if (e.isLeader(t)) expect(etcd.leases.get(e.currentLease() as string)?.expires ?? 0).toBeGreaterThan(t);
      if (f.isLeader(t) && !p2LeadsAt) p2LeadsAt = t;
    }
    expect(e.isLeader(5000)).toBe(false);
    expect(e.problem()).toBe('cannot reach etcd: connection refused');
    expect(e.leader(12_000)).toBeUndefined();
    expect(p2LeadsAt).toBeGreaterThan(6000 - 1); // p1's lease ran out in etcd at 6 s
    expect(p2LeadsAt).toBeLessThan(6500);
    // Back in touch, p1 resigns its retired lease (already gone) and follows p2.
    expect(round(e, server('p1'), etcd, 12_100)).toEqual(['resign', 'grant', 'read', 'register', 'idle']);
    expect(e.leader(12_100)?.name).toBe('p2');
  });

  it.each([
    [
      'without a lease (a plain put)',
      (etcd: ModelEtcd) => etcd.put('leader', JSON.stringify({ name: 'impostor', address: '10.6.6.6:8500' }), '0', 0),
    ],
    [
      'naming a real server at another address',
      (etcd: ModelEtcd) =>
        etcd.put('leader', JSON.stringify({ name: 'p2', address: '10.6.6.6:8500' }), etcd.keys.get('servers/p2')?.lease as string, 0),
    ],
    [
      "naming a real server on a lease that is not its registration's",
      (etcd: ModelEtcd) => etcd.put('leader', JSON.stringify(server('p2')), etcd.grant(0), 0),
    ],
  ])('a leader key no server put (%s) is followed by nobody and removed; the previous leader leads again', (_what, plant) => {
    const etcd = new ModelEtcd();
    const p1 = make('p1');
    const p2 = make('p2');
    round(p1, server('p1'), etcd, 0);
    round(p2, server('p2'), etcd, 0);
    const term = p1.leader(0)?.term as number;
    plant(etcd);
    round(p2, server('p2'), etcd, 100);
    expect(p2.leader(100)).toBeUndefined(); // not followed, even for a moment
    expect(etcd.keys.has('leader')).toBe(false); // and gone
    expect(p2.takeNotes().join()).toMatch(/removed a leader key that no server of this datacenter put/);
    // p1 was the previous leader (the synchronous set names it): it takes over in a new term; p2 may not.
    expect(p2.isLeader(100)).toBe(false);
    round(p1, server('p1'), etcd, 200);
    expect(p1.isLeader(200)).toBe(true);
    expect(p1.leader(200)?.term).toBeGreaterThan(term);
    round(p2, server('p2'), etcd, 300);
    expect(p2.leader(300)?.name).toBe('p1');
  });

  it('three servers through five etcd restarts under random timing: never two leaders, never a leader on a lease etcd let go, and a leader again within two lease times of each return', () => {
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const etcd = new ModelEtcd();
    const names = ['p1', 'p2', 'p3'];
    const cores = names.map((n) => ({ self: server(n), e: make(n), nextRound: 0, nextKeep: 0 }));
    let downUntil = -1;
    let returnedAt = -1;
    const recoveries: number[] = [];
    for (let t = 0, restarts = 0; t < 120_000; t += 10) {
      if (downUntil < 0 && restarts < 5 && t > 10_000 + restarts * 20_000) {
        etcd.down = true;
        downUntil = t + 4000 + Math.floor(random() * 2000);
        restarts++;
      }
      if (downUntil >= 0 && t >= downUntil) {
        etcd.restart(t);
        downUntil = -1;
        returnedAt = t;
      }
      for (const c of cores) {
        if (t >= c.nextKeep) {
          keepalive(c.e, etcd, t);
          c.nextKeep = t + 1000 + Math.floor(random() * 50);
        }
        if (t >= c.nextRound) {
          // A round may also go out a little late, as on a busy machine.
          round(c.e, c.self, etcd, t);
          c.nextRound = t + 250 + Math.floor(random() * 100);
        }
        // The leader's key is about to publish its synchronous set once a follower exists.
        if (c.e.isLeader(t) && c.e.syncRecord()?.members.length === 0 && !etcd.down) {
          const record = {
            leader: c.self.name,
            term: c.e.leader(t)?.term as number,
            members: names.filter((n) => n !== c.self.name).slice(0, 1),
          };
          c.e.syncPublished(record, String(etcd.put('sync', JSON.stringify(record), '0', t)));
        }
      }
      const leaders = cores.filter((c) => c.e.isLeader(t));
      expect(leaders.length).toBeLessThanOrEqual(1);
      for (const l of leaders) expect(etcd.leases.get(l.e.currentLease() as string)?.expires ?? Infinity).toBeGreaterThan(t);
      if (returnedAt >= 0 && leaders.length === 1) {
        recoveries.push(t - returnedAt);
        returnedAt = -1;
      }
      if (returnedAt >= 0) expect(t - returnedAt).toBeLessThan(2 * LEASE);
    }
    expect(recoveries).toHaveLength(5);
  });

  it('a winner whose synchronous-set record is not yet its own does not lead: it claims the record first, and an etcd killed in between leaves it acknowledging nothing', () => {
    const etcd = new ModelEtcd();
    const p1 = make('p1');
    const p2 = make('p2');
    round(p1, server('p1'), etcd, 0);
    round(p2, server('p2'), etcd, 10);
    // p1 leads with p2 as its synchronous follower: only they may take over.
    const record = { leader: 'p1', term: p1.leader(10)?.term as number, members: ['p2'] };
    p1.syncPublished(record, String(etcd.put('sync', JSON.stringify(record), '0', 20)));
    // p1 dies; its lease lapses and its key goes with it.
    etcd.revoke(p1.currentLease() as string, 30);
    // p2 holds the key, but the record still names p1 and its set (the state a shell that took
    // the key and published the record in two calls leaves when etcd is killed in between).
    etcd.put('leader', JSON.stringify(server('p2')), p2.currentLease() as string, 40);
    p2.beginRound(50);
    p2.observed(etcd.view(50), 50);
    // Writes acknowledged now could be lost: p1 may still campaign as the record's leader.
    expect(p2.isLeader(50)).toBe(false);
    expect(p2.whyNotLeader(50)).toBe('it won the election but has not yet published its synchronous set');
    expect(p2.next(50)).toEqual({ kind: 'claim', lease: p2.currentLease(), term: etcd.keys.get('leader')?.create });
    // etcd is killed before the claim: still nothing acknowledged.
    etcd.down = true;
    expect(round(p2, server('p2'), etcd, 60)).toEqual(['read']);
    expect(p2.isLeader(60)).toBe(false);
    etcd.restart(1000);
    expect(round(p2, server('p2'), etcd, 1000)).toEqual(['read', 'claim', 'idle']);
    expect(p2.isLeader(1000)).toBe(true);
    // Now p2 alone may take over: p1 may not campaign any more.
    expect(JSON.parse(etcd.keys.get('sync')?.value as string)).toEqual({
      leader: 'p2',
      term: etcd.keys.get('leader')?.create,
      members: [],
    });
  });

  it('the campaign writes the key and a record naming the winner in one transaction: it leads at once, and only it may take over until it publishes a set', () => {
    const etcd = new ModelEtcd();
    const p1 = make('p1');
    round(p1, server('p1'), etcd, 0);
    const revision = etcd.revision;
    expect(etcd.keys.get('leader')?.create).toBe(revision);
    expect(etcd.keys.get('sync')?.mod).toBe(revision);
    expect(p1.isLeader(0)).toBe(true);
    const p2 = make('p2');
    round(p2, server('p2'), etcd, 10);
    etcd.revoke(p1.currentLease() as string, 20);
    // p2 was never in p1's set: it may not take over.
    expect(round(p2, server('p2'), etcd, 30)).toEqual(['read', 'idle']);
    expect(p2.isLeader(30)).toBe(false);
  });
});
