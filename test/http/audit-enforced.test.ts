import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WatchwordClient } from '../../src/client/index.js';
import { type TestDaemon, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';

type Event = Record<string, any>;

const auditLines = async (file: string): Promise<Event[]> =>
  (await readFile(file, 'utf8').catch(() => ''))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Event);

/** A request from a given local address (a client other than 127.0.0.1). */
function from(localAddress: string, url: string, method: string, token: string, body?: unknown) {
  return new Promise<{ status: number; body: Event }>((resolve, reject) => {
    const req = http.request(
      url,
      { method, localAddress, agent: false, headers: { 'X-Service-Token': token, 'Content-Type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

describe('a write forwarded by a secondary is audited once, at the primary, with the original caller', () => {
  let dc1: TestDaemon;
  let dc2: TestDaemon;
  beforeAll(async () => {
    dc1 = await startTestDaemon();
    dc2 = await startTestDaemon({
      config: secondaryConfig(dc1, {
        node_name: 'dc2-node',
      }),
    });
    await waitFor(async () => (await new WatchwordClient({ address: dc2.url }).replication()).Connected, 10_000);
    // The replication token has replicated here: dc2 proves with it the client it names when it forwards.
    await waitFor(() => dc2.daemon.store.reader.getTokenBySecret(dc1.management) !== undefined, 10_000);
  });
  afterAll(async () => {
    await dc2?.close();
    await dc1?.close();
  });

  it('records it at dc1 with the client address 127.0.0.2, and not at dc2', async () => {
    const res = await from('127.0.0.2', `${dc2.url}/v1/acl/policy`, 'PUT', dc1.management, { Name: 'forwarded' });
    expect(res.status).toBe(200);
    const id = res.body.ID as string;
    await waitFor(
      async () =>
        (await auditLines(join(dc1.dataDir, 'audit', 'audit.log'))).some((e) => e.Type === 'policy-create' && e.Objects?.[0]?.ID === id),
      5000,
    );
    const atPrimary = (await auditLines(join(dc1.dataDir, 'audit', 'audit.log'))).filter((e) => e.Objects?.some((o: Event) => o.ID === id));
    expect(atPrimary).toHaveLength(1);
    expect(atPrimary[0]).toMatchObject({ Type: 'policy-create', Datacenter: 'dc1', RemoteAddr: '127.0.0.2', Path: '/v1/acl/policy' });
    const self = (await dc1.api('GET', '/v1/acl/token/self')).body;
    expect(atPrimary[0]?.AccessorID).toBe(self.AccessorID);
    // dc2 replicated it but made no such write: nothing in its audit log names it.
    await new Promise((r) => setTimeout(r, 200));
    expect((await auditLines(join(dc2.dataDir, 'audit', 'audit.log'))).filter((e) => e.Objects?.some((o: Event) => o.ID === id))).toEqual(
      [],
    );
  });
});

const root = process.getuid?.() === 0;

/**
 * audit_log_mode = enforced on a disk that fills up (a small tmpfs, as the chaos run's
 * full-disk fault): writes are refused with 503 AUDIT_UNAVAILABLE and nothing changes, reads go
 * on, and writes are taken again once the disk has room.
 */
describe.skipIf(!root)('enforced audit log on a full disk', () => {
  let dir = '';
  let d: TestDaemon;
  let file = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'watchword-audit-disk-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k,mode=0700', 'watchword-audit-disk', dir]);
    file = join(dir, 'audit.log');
    d = await startTestDaemon({ config: { audit_log_mode: 'enforced', audit_log_path: file } });
  });
  afterAll(async () => {
    await d?.close();
    try {
      execFileSync('umount', [dir]);
    } catch {
      // not mounted
    }
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses writes with 503 while the audit line cannot be written, serves reads, and recovers', async () => {
    expect((await d.api('PUT', '/v1/acl/policy', { body: { Name: 'before-full' } })).status).toBe(200);
    // Fill the disk.
    const filler = join(dir, 'filler');
    await writeFile(filler, Buffer.alloc(1024 * 1024)).catch(() => undefined);
    // The audit file's last page may still have room for a few lines: write until it has none.
    let name = 'while-full-0';
    let refused = await d.api('PUT', '/v1/acl/policy', { body: { Name: name } });
    for (let i = 1; i < 40 && refused.status === 200; i++)
      refused = await d.api('PUT', '/v1/acl/policy', { body: { Name: (name = `while-full-${i}`) } });
    expect(refused.status).toBe(503);
    // Every write is refused while it lasts.
    expect((await d.api('PUT', '/v1/acl/token', { body: { Description: 'while-full' } })).status).toBe(503);
    expect(refused.body).toMatchObject({ code: 'AUDIT_UNAVAILABLE' });
    expect(refused.body.message).toMatch(/audit log cannot be written \(ENOSPC\)/);
    // Nothing was written, and reads go on.
    expect((await d.api('GET', `/v1/acl/policy/name/${name}`)).status).toBe(404);
    expect((await d.api('GET', '/v1/acl/policy/name/before-full')).status).toBe(200);
    expect((await d.api('GET', '/v1/acl/tokens')).status).toBe(200);
    // Room again: writes are taken and recorded.
    await rm(filler);
    const back = await d.api('PUT', '/v1/acl/policy', { body: { Name: 'after-full' } });
    expect(back.status).toBe(200);
    const written = await auditLines(file);
    expect(written.map((e) => e.Objects?.[0]?.ID)).toContain(back.body.ID);
    expect(written.some((e) => e.Type === 'policy-create' && e.Objects?.[0]?.Name === name)).toBe(false);
  });
});
