/**
 * npm run load:blocking: holds BLOCKING_COUNT (default 5,000) blocking queries open
 * against one daemon (a child process on a temp data dir, loopback only) and checks:
 *   - the daemon's RSS grows by less than 150 MB,
 *   - plain token reads meanwhile answer with p99 under 20 ms,
 *   - one write wakes every blocked request within 1 s.
 * Prints the figures, writes them to bench-results/, exits non-zero if a target is missed.
 * Bounded: a fixed number of requests and a 120 s overall deadline.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemonProcess, stopDaemonProcess } from './daemon-process.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const COUNT = Number(process.env.BLOCKING_COUNT ?? 5000);
const READS = Number(process.env.BLOCKING_READS ?? 500);
const SECRET = 'blocking-load-management-secret';
const deadline = setTimeout(() => {
  process.stderr.write('blocking-load: overall deadline of 120 s passed\n');
  process.exit(2);
}, 120_000);

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

function request(url: string, method = 'GET', body?: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: { 'X-Service-Token': SECRET, ...(body ? { 'Content-Type': 'application/json' } : {}) } }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (data += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data }));
    });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

async function rssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  if (!kb) throw new Error('cannot read VmRSS');
  return Number(kb[1]) * 1024;
}

async function metric(url: string, name: string): Promise<number> {
  const text = (await request(`${url}/v1/agent/metrics?format=prometheus`)).body;
  const m = new RegExp(`^${name} (\\d+(?:\\.\\d+)?)$`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;

async function main(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'watchword-blocking-'));
  // One address holds every watcher here: lift the per-client cap above the load.
  const { proc, url } = await startDaemonProcess(dataDir, ['--initial-management-token', SECRET, '--max-blocking-queries-per-client', String(COUNT * 2), '--http-max-conns-per-client', '0']);
  try {
    const self = JSON.parse((await request(`${url}/v1/acl/token/self`)).body) as { AccessorID: string };
    // Warm up so the baseline includes a running, JIT-compiled daemon.
    for (let i = 0; i < 300; i++) await request(`${url}/v1/acl/token/${self.AccessorID}`);
    const baseline = await rssBytes(proc.pid as number);
    const index = Number((await request(`${url}/v1/acl/tokens`)).headers['x-service-index']);

    const wokenAt: number[] = [];
    let wrongIndex = 0;
    const blocked = Array.from({ length: COUNT }, () =>
      request(`${url}/v1/acl/tokens?index=${index}&wait=5m`).then((res) => {
        wokenAt.push(performance.now());
        if (res.status !== 200 || Number(res.headers['x-service-index']) <= index) wrongIndex++;
      }),
    );
    for (;;) {
      const inFlight = await metric(url, 'watchword_blocking_queries_in_flight');
      if (inFlight >= COUNT) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const held = await rssBytes(proc.pid as number);

    const latencies: number[] = [];
    for (let i = 0; i < READS; i++) {
      const t = performance.now();
      const res = await request(`${url}/v1/acl/token/${self.AccessorID}`);
      latencies.push(performance.now() - t);
      if (res.status !== 200) throw new Error(`plain read failed with ${res.status}`);
    }
    latencies.sort((a, b) => a - b);

    const writeAt = performance.now();
    await request(`${url}/v1/acl/token`, 'PUT', '{"Description":"wake everyone"}');
    await Promise.all(blocked);
    const wakeMs = Math.max(...wokenAt) - writeAt;
    const inFlightAfter = await metric(url, 'watchword_blocking_queries_in_flight');

    const rssGrowthMB = (held - baseline) / 1024 / 1024;
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    const checks = [
      { what: `RSS growth with ${COUNT} blocked requests < 150 MB`, value: `${rssGrowthMB.toFixed(1)} MB`, ok: rssGrowthMB < 150 },
      { what: 'plain token read p99 while they are held < 20 ms', value: `${p99.toFixed(2)} ms (p50 ${p50.toFixed(2)} ms)`, ok: p99 < 20 },
      { what: `one write wakes all ${COUNT} within 1 s`, value: `${wakeMs.toFixed(0)} ms (last response)`, ok: wakeMs < 1000 && wokenAt.length === COUNT && wrongIndex === 0 },
      { what: 'in-flight gauge back to 0 afterwards', value: String(inFlightAfter), ok: inFlightAfter === 0 },
    ];
    console.table(checks);
    const report = { date: new Date().toISOString(), count: COUNT, baselineRSSMB: baseline / 1048576, heldRSSMB: held / 1048576, rssGrowthMB, readP50ms: p50, readP99ms: p99, wakeMs, checks };
    await mkdir(join(ROOT, 'bench-results'), { recursive: true });
    const file = join(ROOT, 'bench-results', `blocking-${report.date.replace(/[:.]/g, '-')}.json`);
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`wrote ${file}\n`);
    if (checks.some((c) => !c.ok)) process.exitCode = 1;
  } finally {
    agent.destroy();
    await stopDaemonProcess(proc);
    await rm(dataDir, { recursive: true, force: true });
    clearTimeout(deadline);
  }
}

await main();
