/**
 * The leader-failover run behind `npm run failover` and its short form in the tests:
 * a 3-server dc1 and a 1-server dc2 (watchword/testing, with its own etcd), writers
 * creating global and Local tokens through every live dc1 server, and the dc1 leader
 * SIGKILLed again and again. Each failover is timed from the kill to the first write a
 * new leader acknowledges. At the end every acknowledged write must be on every dc1
 * server, the global ones on dc2 and the Local ones nowhere else. Bounded in count and time.
 */
import { randomUUID } from 'node:crypto';
import { until } from './agent-process.js';
import { jsonCall } from './http.js';
import { type Cluster, type DatacenterHandle, startCluster } from './index.js';

export interface Failover {
  n: number;
  /** The server killed (the leader at the time). */
  killed: string;
  /** The server that took over. */
  newLeader: string;
  /** From SIGKILL to the first write a new leader acknowledged, ms. */
  ms: number;
}

export interface FailoverReport {
  failovers: Failover[];
  acknowledged: { global: number; local: number };
  /** Acknowledged writes some dc1 server does not hold at the end, as `server: id` (must be empty). */
  lost: string[];
  /** Acknowledged global writes dc2 does not hold (must be empty). */
  notReplicated: string[];
  /** dc1 Local tokens found on dc2 (must be empty). */
  leaked: string[];
  durationMs: number;
}

export interface FailoverOptions {
  /** A cluster with a multi-server dc1 and a dc2; one is started (and stopped) when absent. */
  cluster?: Cluster;
  /** Leader kills in a row (default 10). */
  kills?: number;
  /** Concurrent writers (default 32). */
  writers?: number;
  /** Each writer's pause after an acknowledged write, ms (default 0: as fast as answered). */
  pauseMs?: number;
  log?: (line: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const call = (server: DatacenterHandle, token: string, method: string, path: string, body?: unknown, timeoutMs = 8000) =>
  jsonCall(server.url, { 'X-Service-Token': token }, method, path, body, timeoutMs);

async function tokenIDs(server: DatacenterHandle, token: string): Promise<Set<string>> {
  const list = (await call(server, token, 'GET', '/v1/acl/tokens', undefined, 15_000)).body as Array<{ AccessorID: string }>;
  return new Set(list.map((t) => t.AccessorID));
}

export async function runFailover(options: FailoverOptions = {}): Promise<FailoverReport> {
  if (options.cluster) return failOver(options.cluster, options);
  const cluster = await startCluster({ datacenters: ['dc1', 'dc2'], servers: { dc1: 3 }, logLevel: 'warn', timings: 'production' });
  try {
    return await failOver(cluster, options);
  } finally {
    await cluster.stop();
  }
}

async function failOver(cluster: Cluster, options: FailoverOptions): Promise<FailoverReport> {
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  const token = cluster.managementToken;
  const dc1 = cluster.get('dc1');
  const acknowledged: Array<{ id: string; local: boolean }> = [];
  const failovers: Failover[] = [];
  let stop = false;
  let lastAck = { at: 0, by: '' };

  const writer = async (n: number) => {
    for (let i = 0; !stop && i < 1_000_000; i++) {
      const live = dc1.servers.filter((s) => s.pid !== undefined);
      const target = live[(n + i) % live.length];
      if (!target) {
        await sleep(50);
        continue;
      }
      const local = i % 3 === 0;
      const id = randomUUID();
      try {
        const res = await call(target, token, 'PUT', '/v1/acl/token', { AccessorID: id, Description: `writer ${n}`, Local: local }, 6000);
        if (res.status === 200) {
          acknowledged.push({ id, local });
          lastAck = { at: Date.now(), by: target.serverName };
          if (options.pauseMs) await sleep(options.pauseMs);
        } else await sleep(50);
      } catch {
        await sleep(50);
      }
    }
  };

  const syncSetSize = async (leader: DatacenterHandle) =>
    ((await call(leader, token, 'GET', '/v1/operator/servers')).body as { SyncSet: string[] }).SyncSet.length;

  const writers = Array.from({ length: options.writers ?? 32 }, (_, n) => writer(n));
  try {
    await cluster.waitForReplication(30_000);
    for (let n = 1; n <= (options.kills ?? 10); n++) {
      // Every server up and a synchronous follower published before the next kill.
      const leader = await dc1.leader();
      await until('a synchronous follower', 30_000, async () => (await syncSetSize(leader)) >= 1);
      await sleep(1000);
      const killedAt = Date.now();
      await leader.kill();
      let next: DatacenterHandle | undefined;
      await until(`a write acknowledged after killing ${leader.serverName}`, 20_000, async () => {
        if (lastAck.at <= killedAt + 100) return false;
        next = await dc1.leader(1000);
        return next !== leader;
      });
      const failover = { n, killed: leader.serverName, newLeader: next?.serverName ?? '?', ms: lastAck.at - killedAt };
      failovers.push(failover);
      log(`failover ${n}: killed ${failover.killed}, ${failover.newLeader} took writes after ${failover.ms} ms`);
      await leader.start();
    }
    await sleep(1000);
  } finally {
    stop = true;
    await Promise.all(writers);
  }

  const lost: string[] = [];
  for (const s of dc1.servers) {
    let missing: string[] = [];
    await until(`${s.serverName} to hold every acknowledged write`, 30_000, async () => {
      const have = await tokenIDs(s, token);
      missing = acknowledged.filter((w) => !have.has(w.id)).map((w) => w.id);
      return missing.length === 0;
    }).catch(() => undefined);
    lost.push(...missing.map((id) => `${s.serverName}: ${id}`));
  }
  await cluster.waitForReplication(30_000).catch(() => undefined);
  const dc2 = await tokenIDs(cluster.get('dc2'), token);
  return {
    failovers,
    acknowledged: { global: acknowledged.filter((w) => !w.local).length, local: acknowledged.filter((w) => w.local).length },
    lost,
    notReplicated: acknowledged.filter((w) => !w.local && !dc2.has(w.id)).map((w) => w.id),
    leaked: acknowledged.filter((w) => w.local && dc2.has(w.id)).map((w) => w.id),
    durationMs: Date.now() - started,
  };
}
