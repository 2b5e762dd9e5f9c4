import { rm, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { startDaemon } from '../../src/daemon.js';
import { type TestDaemon, MANAGEMENT_SECRET, apiFor, startTestDaemon, waitFor } from '../helpers/test-daemon.js';
import { mountTmpfs } from '../helpers/tmpfs.js';

describe('a disk that fails writes', () => {
  let d: TestDaemon | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
  });

  it('refuses writes with 503, keeps serving reads, and recovers by itself without losing anything acknowledged', async () => {
    let broken = false;
    d = await startTestDaemon({
      storeFaults: {
        writeError: () => (broken ? Object.assign(new Error('IO error: No space left on device'), { code: 'LEVEL_IO_ERROR' }) : undefined),
      },
    });
    const acknowledged: Array<{ AccessorID: string; SecretID: string }> = [];
    for (let i = 0; i < 20; i++) acknowledged.push((await d.api('PUT', '/v1/acl/token', { body: { Description: `before ${i}` } })).body);

    broken = true;
    const refused = await Promise.all(
      Array.from({ length: 10 }, (_, i) => d!.api('PUT', '/v1/acl/token', { body: { Description: `during ${i}` } })),
    );
    expect(new Set(refused.map((r) => r.status))).toEqual(new Set([503]));
    expect(new Set(refused.map((r) => r.body.code))).toEqual(new Set(['STORE_UNAVAILABLE']));
    expect(refused[0]?.body.message).toMatch(/^store write failed: No space left on device/);
    // Further writes are refused at once while it retries.
    const later = await d.api('PUT', '/v1/acl/policy', { body: { Name: 'during' } });
    expect(later.status).toBe(503);
    expect(later.body.message).toBe('store write failed: No space left on device; retrying until the disk accepts writes again');
    // Reads and token resolution go on from what is durable.
    const reader = apiFor(d.url, acknowledged[3]!.SecretID);
    expect((await reader('GET', '/v1/acl/token/self')).status).toBe(200);
    expect((await d.api('GET', `/v1/acl/token/${acknowledged[7]!.AccessorID}`)).status).toBe(200);
    const listed = (await d.api('GET', '/v1/acl/tokens')).body as Array<{ Description: string }>;
    expect(listed.filter((t) => t.Description.startsWith('before')).length).toBe(20);
    expect(listed.some((t) => t.Description.startsWith('during'))).toBe(false);
    const self = (await d.api('GET', '/v1/agent/self')).body;
    expect(self.Store.Available).toBe(false);
    expect(self.Store.LastError).toBe('No space left on device');
    expect((await d.api('GET', '/v1/agent/metrics?format=prometheus')).text).toMatch(/^watchword_store_available 0$/m);
    // The health check fails by name, for a load balancer to take the server out.
    const health = await d.api('GET', '/v1/agent/health');
    expect(health.status).toBe(503);
    expect(health.body.Status).toBe('critical');
    expect(health.body.Checks.find((c: { Name: string }) => c.Name === 'store')).toMatchObject({
      Passing: false,
      Output: expect.stringContaining('No space left on device'),
    });

    broken = false;
    await waitFor(async () => (await d!.api('PUT', '/v1/acl/token', { body: { Description: 'after' } })).status === 200, 15_000, 100);
    expect((await d.api('GET', '/v1/agent/self')).body.Store).toEqual({ Available: true, LastError: '', UnavailableSince: null });
    expect((await d.api('GET', '/v1/agent/health')).status).toBe(200);
    const after = (await d.api('GET', '/v1/acl/tokens')).body as Array<{ AccessorID: string; Description: string }>;
    for (const t of acknowledged) expect(after.some((x) => x.AccessorID === t.AccessorID)).toBe(true);
    expect(after.some((t) => t.Description.startsWith('during'))).toBe(false);
  });
});

const isRoot = process.getuid?.() === 0;

describe('a data dir on a filesystem that fills up', () => {
  it.skipIf(!isRoot)(
    'answers 503 while the disk is full and recovers once space is freed (tmpfs, needs root)',
    async () => {
      // Not allowed to mount here (a container without the capability): nothing to show.
      const disk = await mountTmpfs('16m');
      if (!disk) return;
      const mount = disk.path;
      const filler = join(mount, 'filler');
      const config = loadConfig({
        flags: { http_addr: '127.0.0.1:0', data_dir: join(mount, 'dc1'), initial_management_token: MANAGEMENT_SECRET, log_level: 'silent' },
      });
      let daemon = await startDaemon(config, { logger: pino({ level: 'silent' }) });
      try {
        const api = apiFor(daemon.url, MANAGEMENT_SECRET);
        const acknowledged: string[] = [];
        for (let i = 0; i < 10; i++)
          acknowledged.push((await api('PUT', '/v1/acl/token', { body: { Description: `before ${i}` } })).body.AccessorID);
        const { bavail, bsize } = await statfs(mount);
        // The audit log may append between statfs and this write: a filler cut short still fills the disk.
        await writeFile(filler, Buffer.alloc(Math.max(0, bavail * bsize - 4096))).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ENOSPC') throw err;
        });
        let status = 200;
        const big = 'x'.repeat(60_000);
        for (let i = 0; i < 200 && status === 200; i++) {
          const res = await api('PUT', '/v1/acl/token', { body: { Description: `filling ${i} ${big}` } });
          status = res.status;
          if (status === 200) acknowledged.push(res.body.AccessorID);
          else expect(res.body.code).toBe('STORE_UNAVAILABLE');
        }
        expect(status).toBe(503);
        expect((await api('GET', `/v1/acl/token/${acknowledged[0]}`)).status).toBe(200);
        await rm(filler);
        await waitFor(async () => (await api('PUT', '/v1/acl/token', { body: { Description: 'after' } })).status === 200, 20_000, 200);
        // Everything acknowledged is there, now and after a restart.
        for (const id of acknowledged) expect((await api('GET', `/v1/acl/token/${id}`)).status).toBe(200);
        await daemon.close();
        daemon = await startDaemon(config, { logger: pino({ level: 'silent' }) });
        const again = apiFor(daemon.url, MANAGEMENT_SECRET);
        for (const id of acknowledged) expect((await again('GET', `/v1/acl/token/${id}`)).status).toBe(200);
      } finally {
        await daemon.close().catch(() => undefined);
        await disk.remove();
      }
    },
    60_000,
  );
});
