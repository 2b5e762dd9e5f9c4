/**
 * Read scale-out (docs/servers.md, "Several servers per datacenter"): token reads by accessor against one server of a 3-server
 * datacenter, then spread over all three (the connections split between them), with
 * each server's CPU time per read answered (from /proc/<pid>/stat). Part of `npm run
 * bench`; needs the etcd binary (skipped with a reason when it is missing).
 */
import { readFile } from 'node:fs/promises';
import autocannon from 'autocannon';
import { type DatacenterHandle, etcdBinary, startCluster } from '../src/testing/index.js';

export interface ServersRow {
  scenario: string;
  reqPerSec: number;
  p99ms: number;
  /** Per server: reads it answered per second, and its CPU time per read, µs. */
  perServer: Array<{ server: string; readsPerSec: number; cpuMicrosPerRead: number }>;
  errors: number;
}

export interface ServersBench {
  skipped?: string;
  single?: ServersRow;
  follower?: ServersRow;
  spread?: ServersRow;
}

const TICKS_PER_SECOND = 100;

/** User + system CPU time of a process so far, ms (Linux). */
async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) in parentheses; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

async function measure(scenario: string, targets: DatacenterHandle[], path: string, token: string, connections: number, duration: number): Promise<ServersRow> {
  const before = await Promise.all(targets.map((s) => cpuMs(s.pid as number)));
  const per = Math.max(1, Math.floor(connections / targets.length));
  const results = await Promise.all(
    targets.map((s) => autocannon({ url: `${s.url}${path}`, headers: { 'X-Service-Token': token }, connections: per, duration })),
  );
  const after = await Promise.all(targets.map((s) => cpuMs(s.pid as number)));
  return {
    scenario,
    reqPerSec: Math.round(results.reduce((n, r) => n + r.requests.average, 0)),
    p99ms: Math.max(...results.map((r) => r.latency.p99)),
    perServer: targets.map((s, i) => {
      const r = results[i] as autocannon.Result;
      const reads = r.requests.total;
      return { server: s.serverName, readsPerSec: Math.round(r.requests.average), cpuMicrosPerRead: reads > 0 ? Math.round((((after[i] as number) - (before[i] as number)) * 1000) / reads) : 0 };
    }),
    errors: results.reduce((n, r) => n + r.errors + r.timeouts + r.non2xx, 0),
  };
}

export async function serversBench(options: { connections: number; duration: number }): Promise<ServersBench> {
  if (!etcdBinary()) return { skipped: 'etcd is not installed (Debian: apt-get install etcd-server)' };
  const cluster = await startCluster({ datacenters: ['dc1'], servers: { dc1: 3 }, logLevel: 'error' });
  try {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    const token = cluster.managementToken;
    const created = await leader.client.tokens.create({ Description: 'read scale-out' });
    const path = `/v1/acl/token/${created.AccessorID}`;
    // Every server holds it before the clock starts; then a warm-up on each.
    for (const s of dc1.servers) {
      for (let i = 0; i < 100; i++) {
        const res = await fetch(`${s.url}${path}`, { headers: { 'X-Service-Token': token } });
        if (res.status === 200) break;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    await measure('warm-up', dc1.servers, path, token, options.connections, 2);
    const single = await measure('token read, one server (the leader)', [leader], path, token, options.connections, options.duration);
    const follower = await measure('token read, one server (a follower)', [dc1.servers.find((s) => s !== leader) as DatacenterHandle], path, token, options.connections, options.duration);
    const spread = await measure('token read, spread over 3 servers', dc1.servers, path, token, options.connections, options.duration);
    return { single, follower, spread };
  } finally {
    await cluster.stop();
  }
}
