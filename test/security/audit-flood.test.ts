import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditLog, systemActor } from '../../src/observability/audit.js';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

/**
 * Fourth security review, finding 4: each anonymous 403 appended up to ~2.4 KB to the one audit
 * file and the one in-memory view, so one client with no credential pushed a token's create and
 * delete out of GET /v1/operator/audit after ~3,500 requests and off the disk after ~307,000.
 * Refusals are now written in full only within a small burst per (client, status, code) and
 * counted beyond it, paths are cut short, and changes are kept in a ring and a file of their own
 * that refusals never enter.
 */
const LONG = `/v1/acl/tokens?filter=${'x'.repeat(2_000)}`;

async function fileLines(dir: string, prefix: string): Promise<Array<Record<string, unknown>>> {
  const out: Array<Record<string, unknown>> = [];
  for (const name of (await readdir(dir)).filter((n) => n.startsWith(prefix))) {
    for (const l of (await readFile(join(dir, name), 'utf8')).split('\n')) if (l) out.push(JSON.parse(l));
  }
  return out;
}

describe('a flood of refusals and the record of changes', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });

  it('keeps a change in memory and on disk after 400,000 anonymous refusals at the default settings', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'watchword-audit-flood-'));
    dirs.push(dir);
    const path = join(dir, 'audit', 'audit.log');
    // The defaults: 64 MiB files, 10 kept.
    const log = new AuditLog(
      { enabled: true, path, mode: 'best-effort', rotateBytes: 64 << 20, maxFiles: 10 },
      { datacenter: 'dc1', server: 's1' },
      pino({ level: 'silent' }),
    );
    await log.open();
    const accessor = '5f0c1d8e-1111-4222-8333-944455556666';
    await log.writeGroup([
      {
        type: 'token-create',
        actor: systemActor('test'),
        details: {},
        raw: `"Index":7,"Objects":[{"Kind":"token","ID":"${accessor}"}]`,
      },
    ]);
    for (let i = 0; i < 400_000; i++) {
      // From many addresses, each over its burst.
      log.record(
        'refused',
        { RequestID: String(i), AccessorID: 'anonymous', RemoteAddr: `10.0.${(i >> 8) & 255}.${i & 255}`, Method: 'GET', Path: LONG },
        403,
        { Code: 'PERMISSION_DENIED', Reason: "Permission denied: anonymous token lacks permission 'acl:read'" },
      );
      if (i % 10_000 === 0) await log.flush();
    }
    await log.close();
    expect(log.query({ id: accessor, limit: 10 }).events.map((e) => e.Type)).toEqual(['token-create']);
    // Disk: in audit.log (never rotated away: refusals past the burst are counted) and in the changes file.
    const all = await fileLines(join(dir, 'audit'), 'audit.log');
    expect(all.some((e) => e.Type === 'token-create')).toBe(true);
    const changes = await fileLines(join(dir, 'audit'), 'audit-changes.log');
    expect(changes.map((e) => e.Type)).toEqual(['token-create']);
    // Every refusal is accounted for: written in full, or counted on a line of its client's.
    const refused = all.filter((e) => e.Type === 'refused');
    expect(refused.reduce((n, e) => n + ((e.Count as number | undefined) ?? 1), 0)).toBe(400_000);
    expect(refused.length).toBeLessThan(2_000);
    for (const e of refused) expect(String(e.Path).length).toBeLessThanOrEqual(512 + 40);
  });

  describe('through HTTP', () => {
    let d: TestDaemon | undefined;
    afterEach(async () => {
      await d?.close();
      d = undefined;
    });

    it("keeps a token's create and delete in GET /v1/operator/audit?id= and on disk after thousands of anonymous refusals", async () => {
      // Keep-alive past the slowest batch: on a busy machine a pooled connection idle for the
      // default 5 s was closed by the server as the next batch reused it ("socket hang up").
      d = await startTestDaemon({ config: { http_keepalive_timeout: '60s' } });
      const t = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'stolen, then revoked' } })).body as { AccessorID: string };
      expect((await d.api('DELETE', `/v1/acl/token/${t.AccessorID}`)).body).toBe(true);
      const N = 4_000;
      for (let i = 0; i < N; i += 50) {
        await Promise.all(
          Array.from({ length: 50 }, async () => {
            const res = await fetch(`${d?.url}${LONG}`);
            await res.arrayBuffer();
            expect(res.status).toBe(403);
          }),
        );
      }
      const seen = (await d.api('GET', `/v1/operator/audit?id=${t.AccessorID}`)).body as unknown as { Events: Array<{ Type: string }> };
      expect(seen.Events.map((e) => e.Type)).toEqual(['token-delete', 'token-create']);
      // The refusals are there too: the first of the burst in full.
      const refusals = (await d.api('GET', '/v1/operator/audit?type=refused&limit=1000')).body as unknown as {
        Events: Array<{ Path: string }>;
      };
      expect(refusals.Events.length).toBeGreaterThanOrEqual(1);
      expect(refusals.Events[0]?.Path.length).toBeLessThanOrEqual(512 + 40);
      const dataDir = d.dataDir;
      // Stopped (the window's counts written), read, then removed in afterEach.
      await d.daemon.close();
      const all = await fileLines(join(dataDir, 'audit'), 'audit.log');
      const anonymous = all.filter((e) => e.Type === 'refused' && e.AccessorID === 'anonymous');
      expect(anonymous.reduce((n, e) => n + ((e.Count as number | undefined) ?? 1), 0)).toBe(N);
      expect(anonymous.length).toBeLessThanOrEqual(11);
      const changes = await fileLines(join(dataDir, 'audit'), 'audit-changes.log');
      expect(changes.filter((e) => JSON.stringify(e.Objects ?? []).includes(t.AccessorID)).map((e) => e.Type)).toEqual([
        'token-create',
        'token-delete',
      ]);
      expect(changes.some((e) => e.Type === 'refused')).toBe(false);
    }, 60_000);
  });
});
