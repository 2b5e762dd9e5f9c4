import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverCall as call } from '../helpers/cluster.js';
import { until } from '../helpers/test-daemon.js';
import { type Cluster, type CoordinatorHandle, type DatacenterHandle, etcdBinary, startCluster } from '../../src/testing/index.js';

// A datacenter of three servers whose etcd crashes and comes back on the same data dir
// (a crash, an OOM kill, a rolling restart): the leader must not keep a leader key alive
// once it stops leading, so a leader is elected again shortly after etcd returns.

const etcd = etcdBinary();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LEASE_MS = 5000;

interface Round {
  id: string;
  /** When it was sent. */
  at: number;
  doneAt: number;
  /** Status from each of the two servers it was sent to at once. */
  statuses: number[];
  codes: string[];
  /** The two servers, in the order of the statuses. */
  to: string[];
}

/**
 * Writers under which the faults happen: each round sends one new AccessorID to two
 * different servers at once (whichever leads, the other forwards to it): an ID that two
 * servers both acknowledge would mean two leaders took writes at once.
 */
class Writers {
  readonly rounds: Round[] = [];
  private running = true;
  private readonly loops: Promise<void>[];

  constructor(
    private readonly servers: DatacenterHandle[],
    private readonly token: string,
    count: number,
  ) {
    this.loops = Array.from({ length: count }, (_, n) => this.loop(n));
  }

  private async loop(n: number): Promise<void> {
    for (let i = 0; this.running && i < 100_000; i++) {
      const id = randomUUID();
      const at = Date.now();
      const pair = [this.servers[(n + i) % 3], this.servers[(n + i + 1) % 3]] as DatacenterHandle[];
      const results = await Promise.all(
        pair.map((s) =>
          call(s, this.token, 'PUT', '/v1/acl/token', { AccessorID: id, Description: `writer ${n}`, Local: i % 3 === 0 }).then(
            (r) => ({ status: r.status, code: String(r.body?.code ?? '') }),
            () => ({ status: 0, code: 'unreachable' }),
          ),
        ),
      );
      this.rounds.push({
        id,
        at,
        doneAt: Date.now(),
        statuses: results.map((r) => r.status),
        codes: results.map((r) => r.code),
        to: pair.map((s) => s.serverName),
      });
      // Paced: the faults need writes in flight, not every core the suite shares.
      await sleep(results.some((r) => r.status === 200) ? 40 : 50);
    }
  }

  acknowledged(): Round[] {
    return this.rounds.filter((r) => r.statuses.includes(200));
  }

  /** Resolves with the first round sent at or after `from` that was acknowledged. */
  async firstAcknowledgedFrom(from: number, timeoutMs: number): Promise<Round> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = this.rounds.find((x) => x.at >= from && x.statuses.includes(200));
      if (r) return r;
      if (Date.now() > deadline) throw new Error(`no write acknowledged within ${timeoutMs} ms of ${new Date(from).toISOString()}`);
      await sleep(50);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }
}

async function everyServerHolds(servers: DatacenterHandle[], token: string, ids: string[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  const lacking = async (s: DatacenterHandle) => {
    const list = (await call(s, token, 'GET', '/v1/acl/tokens', undefined, 15_000).catch(() => ({ body: [] }))).body as unknown as Array<{
      AccessorID: string;
    }>;
    const have = new Set((Array.isArray(list) ? list : []).map((t) => t.AccessorID));
    return ids.filter((id) => !have.has(id));
  };
  for (;;) {
    const missing = await Promise.all(servers.map(lacking));
    if (missing.every((m) => m.length === 0)) return;
    if (Date.now() > deadline) {
      // Every server's gap, so that one server behind is told apart from a write no server kept.
      const report = servers.map(
        (s, i) => `${s.serverName} lacks ${(missing[i] as string[]).length} (${(missing[i] as string[]).slice(0, 3).join(', ')})`,
      );
      throw new Error(`acknowledged writes missing: ${report.join('; ')}`);
    }
    await sleep(250);
  }
}

describe.skipIf(!etcd)('etcd crashes and restarts under a datacenter of three servers', () => {
  let cluster: Cluster;
  let token: string;
  let coordinator: CoordinatorHandle;
  let servers: DatacenterHandle[];

  beforeAll(async () => {
    cluster = await startCluster({ datacenters: { dc1: { servers: 3 } }, logLevel: 'warn' });
    token = cluster.managementToken;
    coordinator = cluster.coordinator as CoordinatorHandle;
    servers = cluster.get('dc1').servers;
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  it('three SIGKILLs of etcd for 4 s each: writes are accepted again within two lease times of each return, nothing acknowledged is lost, no ID is acknowledged twice', async () => {
    const writers = new Writers(servers, token, 6);
    const recoveries: number[] = [];
    try {
      let since = Date.now();
      for (let n = 0; n < 3; n++) {
        // Faults strike a datacenter that is taking writes.
        await writers.firstAcknowledgedFrom(since, 20_000);
        await coordinator.kill();
        await sleep(4000);
        await coordinator.start();
        const back = Date.now();
        const first = await writers.firstAcknowledgedFrom(back, 2 * LEASE_MS + 5000);
        recoveries.push(first.doneAt - back);
        since = first.doneAt;
      }
    } finally {
      await writers.stop();
    }
    const rounds = writers.rounds;
    console.log(
      `etcd restarts: writes accepted again ${recoveries.join(', ')} ms after etcd came back; ${writers.acknowledged().length} of ${rounds.length} raced IDs acknowledged`,
    );
    for (const ms of recoveries) expect(ms).toBeLessThanOrEqual(2 * LEASE_MS);
    // Never two leaders taking writes at once.
    expect(rounds.filter((r) => r.statuses.every((s) => s === 200)).map((r) => r.id)).toEqual([]);
    // Refusals while there was no leader are 503 NO_LEADER (or 409 for the second copy of a raced ID), never a 500.
    expect(rounds.flatMap((r) => r.statuses).filter((s) => s >= 500 && s !== 503)).toEqual([]);
    await everyServerHolds(
      servers,
      token,
      writers.acknowledged().map((r) => r.id),
    );
    // Each server names the leader and reports no problem once it is over (a follower's stream to the leader
    // may still be reconnecting when the writes resume: it names a leader only once that stream has proven it).
    await until('every server naming its leader, with no problem', 15_000, async () => {
      const views = await Promise.all(
        servers.map(
          async (s) => (await call(s, token, 'GET', '/v1/operator/servers')).body as { Problem: string | null; Leader: string | null },
        ),
      );
      if (views.every((v) => v.Leader !== null && v.Problem === null)) return true;
      throw new Error(`last seen: ${JSON.stringify(views.map((v) => ({ Leader: v.Leader, Problem: v.Problem })))}`);
    });
  }, 180_000);

  it('a leader key planted in etcd (no lease) pointing at an impostor: no server sends it anything, nothing is applied from it, and a real leader keeps writes going', async () => {
    // The impostor records every request and would stream whatever a connecting server asked for.
    const seen: Array<{ url: string; headers: Record<string, unknown> }> = [];
    const impostor = createServer((req, res) => {
      seen.push({ url: req.url ?? '', headers: req.headers });
      res.writeHead(200, { 'content-type': 'application/json' }).end('"ok"');
    });
    impostor.on('upgrade', (req, socket) => {
      seen.push({ url: req.url ?? '', headers: req.headers });
      socket.destroy();
    });
    await new Promise<void>((r) => impostor.listen(0, '127.0.0.1', r));
    const address = `127.0.0.1:${(impostor.address() as { port: number }).port}`;
    const writers = new Writers(servers, token, 4);
    const client = new Etcd3({ hosts: coordinator.url });
    try {
      await writers.firstAcknowledgedFrom(Date.now(), 20_000);
      const before = (await client.get('/watchword/dc1/leader').string()) ?? '';
      expect(before).not.toBe('');
      // One unauthenticated put, no lease: the reproduction of the hijack.
      await client.put('/watchword/dc1/leader').value(JSON.stringify({ name: 'impostor', address }));
      const planted = Date.now();
      await sleep(3000);
      const first = await writers.firstAcknowledgedFrom(planted + 1000, 2 * LEASE_MS);
      expect(first.doneAt - planted).toBeLessThan(2 * LEASE_MS);
      const now = JSON.parse((await client.get('/watchword/dc1/leader').string()) ?? '{}') as { name?: string };
      expect(servers.map((s) => s.serverName)).toContain(now.name);
      for (const s of servers) expect((await call(s, token, 'GET', '/v1/status/leader')).body).not.toBe(address);
    } finally {
      await writers.stop();
      client.close();
      await new Promise<void>((r) => impostor.close(() => r()));
    }
    // Nobody connected to the impostor at all: no token, no proof, nothing to apply.
    expect(seen).toEqual([]);
    // Anonymous callers are not told where etcd is (nor anything else of the configuration).
    expect((await fetch(`${servers[0]?.url}/v1/agent/self`)).status).toBe(403);
    expect((await call(servers[0] as DatacenterHandle, token, 'GET', '/v1/agent/self')).body?.Config).toMatchObject({
      Coordinator: expect.stringMatching(/^etcd:\/\//),
    });
    await everyServerHolds(
      servers,
      token,
      writers.acknowledged().map((r) => r.id),
    );
  }, 90_000);

  it('etcd down for 15 s (past the lease): writes are refused with 503 NO_LEADER while it is down, and accepted within 10 s of its return', async () => {
    const writers = new Writers(servers, token, 4);
    let killedAt = 0;
    let restarting = 0;
    let back = 0;
    let first: Round | undefined;
    try {
      await writers.firstAcknowledgedFrom(Date.now(), 20_000);
      await coordinator.kill();
      killedAt = Date.now();
      await sleep(15_000);
      // etcd serves before start() has seen it healthy: a write accepted in between is no fault, so "down" ends here.
      restarting = Date.now();
      await coordinator.start();
      back = Date.now();
      first = await writers.firstAcknowledgedFrom(back, 2 * LEASE_MS + 5000);
    } finally {
      await writers.stop();
    }
    // Once the lease has run out (and until etcd is started again), every write is refused with NO_LEADER.
    const whileDown = writers.rounds.filter((r) => r.at > killedAt + LEASE_MS + 500 && r.doneAt < restarting);
    expect(whileDown.length).toBeGreaterThan(10);
    for (const r of whileDown) {
      // Which server answered what, and when (ms after etcd exited), should it ever fail.
      const seen = JSON.stringify({
        to: r.to,
        statuses: r.statuses,
        codes: r.codes,
        sentAfterKillMs: r.at - killedAt,
        doneAfterKillMs: r.doneAt - killedAt,
      });
      expect(r.statuses, seen).toEqual([503, 503]);
      expect(r.codes).toEqual(['NO_LEADER', 'NO_LEADER']);
    }
    expect((first as Round).doneAt - back).toBeLessThanOrEqual(2 * LEASE_MS);
    console.log(
      `etcd down 15 s: ${whileDown.length} writes refused with NO_LEADER while down; accepted again ${(first as Round).doneAt - back} ms after its return`,
    );
    expect(writers.rounds.filter((r) => r.statuses.every((s) => s === 200))).toEqual([]);
    await everyServerHolds(
      servers,
      token,
      writers.acknowledged().map((r) => r.id),
    );
  }, 120_000);
});
