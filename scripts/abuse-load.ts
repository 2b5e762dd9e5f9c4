/**
 * npm run load:abuse: with the default caps on, sends ABUSE_BOGUS (default 1,000)
 * blocking queries with unknown tokens and holds ABUSE_SLOW (default 200) sockets that
 * sent headers and one byte of a 100-byte body, while measuring plain token reads.
 * Checks:
 *   - plain token reads meanwhile answer with p99 under 20 ms,
 *   - every bogus blocking query is refused (403) without waiting, and no slot stays held,
 *   - every slow socket is closed by the request timeout (408),
 *   - 4 parallel anonymous 600 MB snapshot uploads: each answered 403 within 1 s, and the
 *     daemon's RSS grows less than 50 MB meanwhile (nothing of a body is read before the check),
 *   - binding-rule logins with a catastrophic-backtracking selector and a 10,000-character
 *     claim: each answered in under 50 ms, and a plain read's p99 meanwhile within 2 ms of
 *     the same read's p99 alone.
 * Prints the figures, writes them to bench-results/, exits non-zero if a target is missed.
 * Bounded: a fixed number of requests and a 120 s overall deadline.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { Worker } from 'node:worker_threads';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemonProcess, stopDaemonProcess } from './daemon-process.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BOGUS = Number(process.env.ABUSE_BOGUS ?? 1000);
const SLOW = Number(process.env.ABUSE_SLOW ?? 200);
const READS = Number(process.env.ABUSE_READS ?? 1000);
/** Short enough that the run sees the slow sockets go; the default is 30 s. */
const REQUEST_TIMEOUT = '5s';
const SECRET = 'abuse-load-management-secret';
const deadline = setTimeout(() => {
  process.stderr.write('abuse-load: overall deadline of 120 s passed\n');
  process.exit(2);
}, 120_000);

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function request(url: string, token = SECRET): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { agent, headers: { 'X-Service-Token': token } }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (data += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * The abusive clients run in a worker thread with its own event loop, so that handling
 * their answers does not delay the measured reads in this one.
 */
const ABUSER = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const net = require('node:net');
const { url, secret, bogus, slow, index } = workerData;
const { hostname, port } = new URL(url);
const agent = new http.Agent({ keepAlive: true, maxSockets: 100 });
function slowBody() {
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let received = '';
    socket.on('data', (b) => (received += b.toString()));
    socket.on('error', () => undefined);
    socket.once('close', () => resolve({ line: received.split('\\r\\n')[0] || '', at: Date.now() }));
    socket.write('PUT /v1/acl/policy HTTP/1.1\\r\\nHost: x\\r\\nX-Service-Token: ' + secret + '\\r\\nContent-Length: 100\\r\\n\\r\\n{');
  });
}
function bogusRead() {
  return new Promise((resolve, reject) => {
    const req = http.request(url + '/v1/acl/tokens?index=' + index + '&wait=10m', { agent, headers: { 'X-Service-Token': crypto.randomUUID() } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end();
  });
}
(async () => {
  const started = Date.now();
  const slowEnds = Array.from({ length: slow }, slowBody);
  const statuses = {};
  // In waves of 100 at a time, as abusive clients would keep doing.
  for (let i = 0; i < bogus; i += 100) {
    const wave = await Promise.all(Array.from({ length: Math.min(100, bogus - i) }, bogusRead));
    for (const s of wave) statuses[s] = (statuses[s] || 0) + 1;
  }
  parentPort.postMessage({ t: 'bogus-done', statuses });
  const ends = await Promise.all(slowEnds);
  agent.destroy();
  parentPort.postMessage({ t: 'slow-done', ends: ends.map((e) => ({ line: e.line, ms: e.at - started })) });
})();
`;

async function metric(url: string, name: string): Promise<number> {
  const text = (await request(`${url}/v1/agent/metrics?format=prometheus`)).body;
  const m = new RegExp(`^${name} (\\d+(?:\\.\\d+)?)$`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;

async function rss(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

/** PUT /v1/snapshot, anonymous, with a 600 MB body written as fast as the socket takes it; resolves with the answer. */
function upload(url: string, size: number): Promise<{ status: number; ms: number }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const req = http.request(`${url}/v1/snapshot`, { method: 'PUT', headers: { 'Content-Length': String(size), 'Content-Type': 'application/octet-stream' } });
    let answered = false;
    const chunk = Buffer.alloc(1024 * 1024, 0x61);
    let sent = 0;
    req.on('response', (res) => {
      answered = true;
      res.resume();
      resolve({ status: res.statusCode ?? 0, ms: performance.now() - started });
    });
    // The daemon cuts the connection a second after its answer: a write may then fail.
    req.on('error', () => setTimeout(() => !answered && resolve({ status: 0, ms: performance.now() - started }), 2000));
    const write = (): void => {
      while (!answered && !req.destroyed && sent < size) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', write);
      }
      if (!answered && sent >= size) req.end();
    };
    write();
  });
}

async function snapshotUploads(url: string, pid: number): Promise<{ statuses: number[]; ms: number[]; before: number; peak: number; growth: number }> {
  const before = await rss(pid);
  let peak = before;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, await rss(pid).catch(() => 0));
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const answers = await Promise.all(Array.from({ length: 4 }, () => upload(url, 600 * 1024 * 1024)));
  await new Promise((r) => setTimeout(r, 1500));
  sampling = false;
  await sampler;
  return { statuses: answers.map((a) => a.status), ms: answers.map((a) => a.ms), before, peak, growth: peak - before };
}

/** A JWT method whose binding rule backtracks catastrophically in a backtracking engine; logins with a 10,000-character claim. */
async function hostileLogins(url: string, accessor: string): Promise<{ logins: number; loginMaxMs: number; statuses: string; aloneP99: number; duringP99: number }> {
  const { SignJWT, exportSPKI, generateKeyPair } = await import('jose');
  const keys = await generateKeyPair('RS256');
  const put = (path: string, body: unknown) =>
    fetch(`${url}${path}`, { method: 'PUT', headers: { 'X-Service-Token': SECRET }, body: JSON.stringify(body) }).then((r) => {
      if (!r.ok) throw new Error(`${path}: ${r.status}`);
    });
  await put('/v1/acl/auth-method', { Name: 'corp', Type: 'jwt', Config: { JWTValidationPubKeys: [await exportSPKI(keys.publicKey)], ClaimMappings: { email: 'email' } } });
  await put('/v1/acl/binding-rule', { AuthMethod: 'corp', Selector: 'value.email matches "^([a-z0-9]+[.]?)+@corp[.]com$"', BindType: 'service', BindName: 'mail' });
  const bearer = await new SignJWT({ email: `${'a'.repeat(10_000)}!` }).setProtectedHeader({ alg: 'RS256' }).setIssuedAt().setExpirationTime('10m').sign(keys.privateKey);
  const reads = async (n: number): Promise<number> => {
    const l: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await request(`${url}/v1/acl/token/${accessor}`);
      l.push(performance.now() - t);
    }
    l.sort((a, b) => a - b);
    return percentile(l, 99);
  };
  const aloneP99 = await reads(1000);
  let running = true;
  const loginTimes: number[] = [];
  const statuses: Record<number, number> = {};
  const loginLoop = (async () => {
    while (running && loginTimes.length < 2000) {
      const t = performance.now();
      const res = await fetch(`${url}/v1/acl/login`, { method: 'POST', body: JSON.stringify({ AuthMethod: 'corp', BearerToken: bearer }) });
      await res.text();
      loginTimes.push(performance.now() - t);
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    }
  })();
  const duringP99 = await reads(1000);
  running = false;
  await loginLoop;
  return { logins: loginTimes.length, loginMaxMs: Math.max(...loginTimes), statuses: JSON.stringify(statuses), aloneP99, duringP99 };
}

async function main(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'watchword-abuse-'));
  // The login limit is off here: each hostile login must really be evaluated.
  const { proc, url } = await startDaemonProcess(dataDir, ['--initial-management-token', SECRET, '--http-request-timeout', REQUEST_TIMEOUT, '--login-rate', '0']);
  try {
    const self = JSON.parse((await request(`${url}/v1/acl/token/self`)).body) as { AccessorID: string };
    for (let i = 0; i < 300; i++) await request(`${url}/v1/acl/token/${self.AccessorID}`);
    const index = Number((await request(`${url}/v1/acl/tokens`)).headers['x-service-index']);

    const worker = new Worker(ABUSER, { eval: true, workerData: { url, secret: SECRET, bogus: BOGUS, slow: SLOW, index } });
    const bogusDone = new Promise<Record<string, number>>((resolve) => worker.on('message', (m: { t: string; statuses: Record<string, number> }) => m.t === 'bogus-done' && resolve(m.statuses)));
    const slowDone = new Promise<Array<{ line: string; ms: number }>>((resolve) => worker.on('message', (m: { t: string; ends: Array<{ line: string; ms: number }> }) => m.t === 'slow-done' && resolve(m.ends)));

    const latencies: number[] = [];
    for (let i = 0; i < READS; i++) {
      const t = performance.now();
      const res = await request(`${url}/v1/acl/token/${self.AccessorID}`);
      latencies.push(performance.now() - t);
      if (res.status !== 200) throw new Error(`plain read failed with ${res.status}`);
    }
    latencies.sort((a, b) => a - b);
    const bogusStatuses = await bogusDone;
    const inFlightAfter = await metric(url, 'watchword_blocking_queries_in_flight');
    const slowEnds = await slowDone;
    await worker.terminate();
    const slowClosedMs = Math.max(...slowEnds.map((s) => s.ms));
    const timedOut = slowEnds.filter((s) => s.line === 'HTTP/1.1 408 Request Timeout').length;

    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    const uploads = await snapshotUploads(url, proc.pid as number);
    const redos = await hostileLogins(url, self.AccessorID);
    const checks = [
      { what: `plain token read p99 under ${BOGUS} bogus blocking queries and ${SLOW} slow bodies < 20 ms`, value: `${p99.toFixed(2)} ms (p50 ${p50.toFixed(2)} ms)`, ok: p99 < 20 },
      { what: 'every bogus blocking query refused with 403', value: JSON.stringify(bogusStatuses), ok: bogusStatuses['403'] === BOGUS },
      { what: 'blocking slots held afterwards', value: String(inFlightAfter), ok: inFlightAfter === 0 },
      { what: `slow-body sockets closed with 408 (request timeout ${REQUEST_TIMEOUT})`, value: `${timedOut} of ${SLOW}, last after ${(slowClosedMs / 1000).toFixed(1)} s`, ok: timedOut === SLOW },
      { what: '4 parallel anonymous 600 MB snapshot uploads answered 403 within 1 s each', value: `${uploads.statuses.join(', ')} in ${uploads.ms.map((m) => m.toFixed(0)).join(', ')} ms`, ok: uploads.statuses.every((s) => s === 403) && uploads.ms.every((m) => m < 1000) },
      { what: 'daemon RSS growth during those uploads < 50 MB', value: `${(uploads.growth / 1024 / 1024).toFixed(1)} MB (${(uploads.before / 1024 / 1024).toFixed(0)} MB before, peak ${(uploads.peak / 1024 / 1024).toFixed(0)} MB)`, ok: uploads.growth < 50 * 1024 * 1024 },
      { what: 'ReDoS rule, 10,000-character claim: each login answered < 50 ms', value: `max ${redos.loginMaxMs.toFixed(1)} ms over ${redos.logins} logins (answers: ${redos.statuses})`, ok: redos.loginMaxMs < 50 },
      { what: 'plain read p99 during those logins vs alone (within 2 ms)', value: `${redos.duringP99.toFixed(2)} ms vs ${redos.aloneP99.toFixed(2)} ms`, ok: redos.duringP99 <= redos.aloneP99 + 2 },
    ];
    console.table(checks);
    const report = { date: new Date().toISOString(), bogus: BOGUS, slow: SLOW, readP50ms: p50, readP99ms: p99, slowClosedMs, uploads, redos, checks };
    await mkdir(join(ROOT, 'bench-results'), { recursive: true });
    const file = join(ROOT, 'bench-results', `abuse-${report.date.replace(/[:.]/g, '-')}.json`);
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
