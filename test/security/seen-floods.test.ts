import { randomUUID } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon, waitFor } from '../helpers/test-daemon.js';
import { rawWatch } from '../helpers/watch.js';

// The fifth security review, findings 2 and 3: forged `denied-by-client` reports shared the audit
// log and the refusals' ring with every refusal (a flood rotated earlier refusals away, and wrote
// lines naming any client), and anonymous decision requests filled the record of checks for the
// life of the process (a dry run then saw no flip). Both at the defaults.

/**
 * The floods' sizes: the review's (100,000 reports, 400,000 refusals) with WATCHWORD_FLOOD_SCALE=1; a tenth of them in
 * the suite. What holds does not depend on the count: past a burst every line is counted, not written.
 */
const SCALE = Number(process.env.WATCHWORD_FLOOD_SCALE ?? 0.1);
const REPORTS = Math.round(100_000 * SCALE);
const REFUSALS = Math.round(400_000 * SCALE);

interface Event {
  Type: string;
  AccessorID: string;
  Path: string;
  RemoteAddr: string;
  Objects?: Array<{ ID: string }>;
  Client?: string;
  Denials?: Array<{ Segment?: string }>;
}

/**
 * Sends `count` copies of `request` (one request, or `perCopy` of them) on a keep-alive connection from `localAddress`,
 * pipelined; resolves the statuses seen.
 */
function pipelined(url: string, request: string, count: number, localAddress = '127.0.0.1', perCopy = 1): Promise<Map<number, number>> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const statuses = new Map<number, number>();
    let seen = 0;
    let tail = '';
    const socket = connect({ host: u.hostname, port: Number(u.port), localAddress }, () => {
      // In batches, so that neither end holds the whole flood at once.
      let sent = 0;
      const more = () => {
        while (sent < count) {
          const n = Math.min(Math.max(1, Math.floor(2_000 / perCopy)), count - sent);
          sent += n;
          if (!socket.write(request.repeat(n))) return void socket.once('drain', more);
        }
      };
      more();
    });
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      const text = tail + chunk;
      const re = /HTTP\/1\.1 (\d{3}) /g;
      let m: RegExpExecArray | null;
      let last = 0;
      while ((m = re.exec(text)) !== null) {
        const status = Number(m[1]);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        seen++;
        last = re.lastIndex;
      }
      tail = text.slice(Math.max(last, text.length - 32));
      if (seen >= count * perCopy) socket.end();
    });
    socket.on('close', () => resolve(statuses));
    socket.on('error', reject);
  });
}

const audit = async (d: TestDaemon, query: string): Promise<Event[]> =>
  (await d.api('GET', `/v1/operator/audit?limit=1000&${query}`)).body.Events as unknown as Event[];

async function fileText(d: TestDaemon, prefix: string): Promise<string> {
  let text = '';
  const dir = join(d.dataDir, 'audit');
  for (const f of await readdir(dir)) if (f.startsWith(prefix)) text += await readFile(join(dir, f), 'utf8');
  return text;
}

describe('finding 2: forged client reports and anonymous refusals, at the defaults', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon({ config: { http_max_conns_per_client: 0 } });
  });
  afterAll(() => d?.close());

  it(`keep an earlier refusal in ?type=refused and on disk, and a change in ?id=, after ${REPORTS} reports and ${REFUSALS} refusals`, async () => {
    // What must survive: a refusal from another client, and a change.
    const marker = `/v1/acl/token/${randomUUID()}`;
    const early = await pipelined(d.url, `GET ${marker} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, 1, '127.0.0.2');
    expect(early.get(403)).toBe(1);
    const policy = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'survivor', Rules: 'acl = "read"' } })).body as { ID: string };
    await waitFor(async () => (await audit(d, 'type=refused')).some((e) => e.Path === marker), 5_000, 50, 'the early refusal');

    // 100,000 reports over 10 watches, each claiming a denial of a real token for a made-up service `payments-api`,
    // with the longest segment a report may carry.
    const victim = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'victim' } })).body as {
      SecretID: string;
      AccessorID: string;
    };
    const watches = await Promise.all(Array.from({ length: 10 }, () => rawWatch(d.url, d.management)));
    for (const w of watches) w.send({ t: 'watch', seq: 1, add: [[1, victim.SecretID, '']] });
    await waitFor(() => watches.every((w) => w.frames.some((f) => f.t === 'changes')), 5_000, 10, 'the watches answered');
    const segment = 'k'.repeat(4_096);
    const report = JSON.stringify({
      t: 'report',
      client: 'payments-api',
      denied: [[1, 'key', segment, 'write', 'default', 'default', 1]],
      allowed: [],
      unknown: 5,
      dropped: 0,
    });
    for (let i = 0; i < REPORTS / 10; i++) for (const w of watches) w.send(report);
    await Promise.all(
      watches.map(
        (w) =>
          new Promise<void>((resolve) => {
            const check = () => (w.ws.bufferedAmount === 0 ? resolve() : setTimeout(check, 20));
            check();
          }),
      ),
    );

    // The anonymous refusals from one address, pipelined on 4 connections.
    const refused = await Promise.all(
      Array.from({ length: 4 }, () => pipelined(d.url, 'GET /v1/acl/tokens HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', REFUSALS / 4)),
    );
    expect(refused.reduce((n, m) => n + (m.get(403) ?? 0), 0)).toBe(REFUSALS);
    for (const w of watches) w.ws.close();
    // In memory: the early refusal in ?type=refused, the change in ?id=; the reports a burst under the watch's own credential.
    expect((await audit(d, 'type=refused')).some((e) => e.Path === marker)).toBe(true);
    expect((await audit(d, `id=${policy.ID}`)).length).toBeGreaterThan(0);
    const lines = await audit(d, 'type=denied-by-client');
    expect(lines.length).toBeLessThanOrEqual(11);
    const management = (await d.api('GET', '/v1/acl/token/self')).body.AccessorID;
    expect(lines.every((e) => e.AccessorID === management)).toBe(true);
    expect(lines.every((e) => (e.Denials?.[0]?.Segment?.length ?? 0) <= 256)).toBe(true);
    // Stopped (its files flushed), its data dir kept until afterAll.
    await d.daemon.close();

    // Written to disk at close: the early refusal is in the refusals' own file, the change in the changes' file.
    const refusals = await fileText(d, 'audit-refused.log');
    expect(refusals).toContain(marker);
    const changes = await fileText(d, 'audit-changes.log');
    expect(changes).toContain(policy.ID);
    // The clients' reports were admitted a burst, then counted: the file of their own stays small, segments cut.
    const reports = await fileText(d, 'audit-denied-by-client.log');
    const reportLines = reports.split('\n').filter(Boolean);
    process.stdout.write(
      `floods: ${reportLines.length} report lines (${(reports.length / 1024).toFixed(0)} KiB), ` +
        `${refusals.split('\n').filter(Boolean).length} refusal lines\n`,
    );
    expect(reportLines.length).toBeLessThan(100);
    expect(reports).not.toContain(segment);
    for (const line of reportLines) expect(JSON.parse(line).AccessorID).not.toBe('client');
  }, 180_000);
});

describe('finding 3: anonymous decision requests cannot blind a dry run', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon({ config: { http_max_conns_per_client: 0 } });
  });
  afterAll(() => d?.close());

  it('still sees a flip in use after 100,000 anonymous distinct checks', async () => {
    // 100,000 distinct checks, 64 to a request, anonymous.
    const bodies: string[] = [];
    for (let i = 0; i < 100_000; i += 64) {
      const checks = Array.from({ length: Math.min(64, 100_000 - i) }, (_, k) => ({
        Resource: 'key',
        Segment: `flood/${i + k}/${'x'.repeat(200)}`,
        Access: 'read',
      }));
      bodies.push(JSON.stringify(checks));
    }
    const requests = bodies
      .map(
        (b) =>
          `POST /v1/internal/acl/authorize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`,
      )
      .join('');
    const statuses = await pipelined(d.url, requests, 1, '127.0.0.1', bodies.length);
    expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
    // Then a token in use asks a check a policy change would take away.
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'web-writer', Rules: 'service "web" { policy = "write" }' } }))
      .body as { ID: string };
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body as {
      SecretID: string;
      AccessorID: string;
    };
    const asked = await d.api('POST', '/v1/internal/acl/authorize', {
      token: t.SecretID,
      body: [{ Resource: 'service', Segment: 'web', Access: 'write' }],
    });
    expect(asked.status).toBe(200);
    const dry = await d.api('PUT', `/v1/acl/policy/${p.ID}?dry-run`, {
      body: { Name: 'web-writer', Rules: 'service "web" { policy = "read" }' },
    });
    expect(dry.status).toBe(200);
    const flips = (
      dry.body as unknown as { Flips: Array<{ Resource: string; Segment?: string; Access: string; Tokens: number; Example: string }> }
    ).Flips;
    expect(flips).toEqual([
      expect.objectContaining({ Resource: 'service', Segment: 'web', Access: 'write', Tokens: 1, Example: t.AccessorID }),
    ]);
  }, 120_000);
});
