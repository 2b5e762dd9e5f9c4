/**
 * The TLS figure of docs/development.md, "Development": a token read over HTTPS with keep-alive against the same read
 * over plain HTTP, in the same run. Two daemons serve copies of one seeded data dir, one
 * with a certificate made here; both run on one core (taskset -c 1) and the load generator
 * (this process) on the other (taskset -c 0); rounds alternate between them and the median
 * of each is compared. Without taskset (or with one core) nothing is pinned, and it says so.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { createCA, createCert } from '../src/transport/certs.js';
import { canPin, medianOf, pinSelf, unpinSelf } from './bench-process.js';
import { startDaemonProcess, stopDaemonProcess } from './daemon-process.js';
import { cpuMicros } from './bench-http.js';

export interface TlsBench {
  /** cpuMicros: the daemon's CPU time per request (user + system, all threads), µs. */
  plain: { reqPerSec: number; p99ms: number; cpuMicros?: number };
  tls: { reqPerSec: number; p99ms: number; cpuMicros?: number };
  ratio: number;
  pinned: boolean;
  rounds: number;
}

/** `plainDir` and `tlsDir` hold copies of one data dir whose management token is `secret`. */
export async function tlsBench(plainDir: string, tlsDir: string, secret: string, options: { seconds: number; rounds: number; connections: number }): Promise<TlsBench> {
  const certs = await mkdtemp(join(tmpdir(), 'watchword-bench-tls-'));
  const pinned = canPin();
  const pin = pinned ? '1' : undefined;
  try {
    const ca = await createCA({ domain: 'watchword', days: 1 });
    const server = await createCert(ca, { kind: 'server', datacenter: 'dc1', domain: 'watchword', days: 1 });
    await writeFile(join(certs, 'ca.pem'), ca.cert);
    await writeFile(join(certs, 'server.pem'), server.cert);
    await writeFile(join(certs, 'server-key.pem'), server.key, { mode: 0o600 });
    const plain = await startDaemonProcess(plainDir, [], undefined, pin);
    const secure = await startDaemonProcess(tlsDir, ['--tls-ca-file', join(certs, 'ca.pem'), '--tls-cert-file', join(certs, 'server.pem'), '--tls-key-file', join(certs, 'server-key.pem')], undefined, pin);
    if (pinned) pinSelf('0');
    try {
      const headers = { 'X-Service-Token': secret };
      const undici = await import('undici');
      const dispatcher = new undici.Agent({ connect: { ca: ca.cert } });
      const self = (await (await undici.fetch(`${secure.url}/v1/acl/token/self`, { headers, dispatcher })).json()) as { AccessorID: string };
      const path = `/v1/acl/token/${self.AccessorID}`;
      const run = async (url: string, seconds: number) => {
        const pid = url === plain.url ? plain.proc.pid : secure.proc.pid;
        const before = await cpuMicros(pid);
        const r = await autocannon({ url: url + path, headers, connections: options.connections, duration: seconds });
        const after = await cpuMicros(pid);
        if (r.non2xx > 0 || r.errors > 0) throw new Error(`${url}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
        return { reqPerSec: Math.round(r.requests.average), p99ms: r.latency.p99, ...(before !== undefined && after !== undefined && r.requests.total > 0 ? { cpuMicros: Math.round((after - before) / r.requests.total) } : {}) };
      };
      // Warm both up (compiled code, TLS session set-up), then alternate.
      await run(plain.url, 2);
      await run(secure.url, 2);
      const rounds = Math.max(3, options.rounds);
      const p: Array<{ reqPerSec: number; p99ms: number; cpuMicros?: number }> = [];
      const t: Array<{ reqPerSec: number; p99ms: number; cpuMicros?: number }> = [];
      for (let i = 0; i < rounds; i++) {
        p.push(await run(plain.url, options.seconds));
        t.push(await run(secure.url, options.seconds));
      }
      const row = (xs: typeof p) => {
        const cpu = xs.flatMap((x) => (x.cpuMicros === undefined ? [] : [x.cpuMicros]));
        return { reqPerSec: medianOf(xs.map((x) => x.reqPerSec)), p99ms: medianOf(xs.map((x) => x.p99ms)), ...(cpu.length > 0 ? { cpuMicros: medianOf(cpu) } : {}) };
      };
      const plainRow = row(p);
      const tlsRow = row(t);
      await dispatcher.close();
      return { plain: plainRow, tls: tlsRow, ratio: tlsRow.reqPerSec / plainRow.reqPerSec, pinned, rounds };
    } finally {
      if (pinned) unpinSelf();
      await stopDaemonProcess(plain.proc);
      await stopDaemonProcess(secure.proc);
    }
  } finally {
    await rm(certs, { recursive: true, force: true });
  }
}
