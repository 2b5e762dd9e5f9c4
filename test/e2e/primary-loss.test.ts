import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { type Daemon, startDaemon } from '../../src/daemon.js';
import type { PromotionResponse } from '../../src/api/schemas.js';
import { type Api, MANAGEMENT_SECRET, apiFor, waitFor } from '../helpers/test-daemon.js';
import { tempDir } from '../helpers/temp-dir.js';

/** Short timings: a silent primary is noticed in ~1 s, other datacenters are asked every 200 ms. */
const REPLICATION = { heartbeatMs: 200, deadPeerMs: 1000, backoffMinMs: 100, backoffMaxMs: 300, primaryProbeMs: 200 };

interface Dc {
  name: string;
  dir: string;
  daemon: Daemon;
  api: Api;
}

async function start(name: string, dir: string, primary: string | undefined, port = 0): Promise<Dc> {
  const config = loadConfig({
    flags: {
      http_addr: `127.0.0.1:${port}`,
      data_dir: dir,
      datacenter: name,
      primary_datacenter: 'dc1',
      ...(primary ? { primary_address: primary } : { initial_management_token: MANAGEMENT_SECRET }),
      // Every datacenter may follow another one day: each has a replication token.
      replication_token: MANAGEMENT_SECRET,
      log_level: 'silent',
      node_name: `${name}-node`,
    },
  });
  const daemon = await startDaemon(config, { logger: pino({ level: 'silent' }), replication: REPLICATION });
  return { name, dir, daemon, api: apiFor(daemon.url, MANAGEMENT_SECRET) };
}

/** The same datacenter again, on its data dir and port. */
const restart = (dc: Dc, primary: string | undefined): Promise<Dc> => start(dc.name, dc.dir, primary, Number(new URL(dc.daemon.url).port));

async function auditLines(dc: Dc, type: string): Promise<Array<Record<string, unknown>>> {
  const text = await readFile(join(dc.dir, 'audit', 'audit.log'), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((e) => e.Type === type);
}

describe('losing the primary datacenter (SPEC §21)', () => {
  const dirs: Array<{ path: string; remove(): Promise<void> }> = [];
  let dc1: Dc;
  let dc2: Dc;
  let dc3: Dc;
  const running = new Set<Dc>();

  beforeAll(async () => {
    for (let i = 0; i < 3; i++) dirs.push(await tempDir());
    dc1 = await start('dc1', dirs[0]!.path, undefined);
    dc2 = await start('dc2', dirs[1]!.path, dc1.daemon.url);
    dc3 = await start('dc3', dirs[2]!.path, dc1.daemon.url);
    for (const d of [dc1, dc2, dc3]) running.add(d);
  });
  afterAll(async () => {
    for (const d of running) await d.daemon.close().catch(() => undefined);
    for (const d of dirs) await d.remove();
  });

  it('promotes dc2, dc3 follows it, and the returning old primary rejoins as a secondary, its unshipped writes audited', async () => {
    for (const d of [dc2, dc3]) await waitFor(async () => (await d.api('GET', '/v1/acl/replication')).body.Connected === true, 10_000);
    const before = (await dc1.api('PUT', '/v1/acl/policy', { body: { Name: 'before-loss', Rules: 'acl = "read"' } })).body;
    const local2 = (await dc2.api('PUT', '/v1/acl/token', { body: { Local: true, Description: 'dc2 local' } })).body;
    const local3 = (await dc3.api('PUT', '/v1/acl/token', { body: { Local: true, Description: 'dc3 local' } })).body;
    for (const d of [dc2, dc3]) await waitFor(async () => (await d.api('GET', `/v1/acl/policy/${before.ID}`)).status === 200, 5000);

    // Promotion while dc2 still hears dc1 needs force.
    const refused = await dc2.api('PUT', '/v1/operator/primary?promote');
    expect(refused.status).toBe(409);
    expect(refused.body.message).toContain('still hears the primary dc1');

    // dc2 and dc3 go (a partition); dc1 acknowledges a write neither got, and is then lost too.
    const primaryURL = dc1.daemon.url;
    for (const d of [dc2, dc3]) {
      await d.daemon.close();
      running.delete(d);
    }
    const unshipped = await dc1.api('PUT', '/v1/acl/policy', { body: { Name: 'unshipped', Rules: 'acl = "read"' } });
    expect(unshipped.status).toBe(200);
    await dc1.daemon.close();
    running.delete(dc1);
    dc2 = await restart(dc2, primaryURL);
    dc3 = await restart(dc3, primaryURL);
    running.add(dc2);
    running.add(dc3);

    const promoted = await dc2.api<PromotionResponse>('PUT', '/v1/operator/primary?promote');
    expect(promoted.status).toBe(200);
    expect(promoted.body).toMatchObject({ Datacenter: 'dc2', Epoch: 2, PreviousPrimary: 'dc1', PreviousEpoch: 1, Forced: false });
    // The recovery point: the unshipped write lies after it, as the answer warns.
    expect(promoted.body.LastIndex).toBeLessThan(Number(unshipped.headers.get('x-service-index')));
    expect(promoted.body.Warning).toContain('may be lost');
    expect(Date.parse(promoted.body.LastContact ?? '')).toBeGreaterThan(Date.now() - 60_000);
    await waitFor(async () => (await auditLines(dc2, 'primary-promoted')).length > 0, 2000);
    expect((await auditLines(dc2, 'primary-promoted'))[0]).toMatchObject({ Epoch: 2, PreviousPrimary: 'dc1', LastIndex: promoted.body.LastIndex });
    expect((await dc2.api('PUT', '/v1/operator/primary?promote')).status).toBe(409);

    // dc2 takes global writes at once; dc3 learns of epoch 2 and follows dc2 without a restart.
    const after = await dc2.api('PUT', '/v1/acl/policy', { body: { Name: 'after-promotion', Rules: 'acl = "read"' } });
    expect(after.status).toBe(200);
    expect((await dc2.api('GET', '/v1/operator/primary')).body).toMatchObject({ Datacenter: 'dc2', Epoch: 2 });
    await waitFor(async () => (await dc3.api('GET', `/v1/acl/policy/${after.body.ID}`)).status === 200, 15_000, 50, 'dc3 follows dc2');
    expect((await dc3.api('GET', '/v1/operator/primary')).body).toMatchObject({ Datacenter: 'dc2', Epoch: 2 });
    // A global write at dc3 goes to dc2 now.
    const viaDc3 = await dc3.api('PUT', '/v1/acl/token', { body: { Description: 'global via dc3' } });
    expect(viaDc3.status).toBe(200);
    expect((await dc2.api('GET', `/v1/acl/token/${viaDc3.body.AccessorID}`)).status).toBe(200);
    // Local tokens survived every step.
    expect((await dc2.api('GET', `/v1/acl/token/${local2.AccessorID}`)).status).toBe(200);
    expect((await dc3.api('GET', `/v1/acl/token/${local3.AccessorID}`)).status).toBe(200);
    expect((await dc3.api('GET', '/v1/catalog/datacenters')).body[0]).toBe('dc2');

    // The old primary returns: it learns of epoch 2, stops taking global writes and rejoins as dc2's secondary.
    dc1 = await restart(dc1, undefined);
    running.add(dc1);
    await waitFor(async () => (await dc1.api('GET', '/v1/operator/primary')).body.Datacenter === 'dc2', 15_000, 50, 'dc1 follows dc2');
    await waitFor(async () => (await dc1.api('GET', `/v1/acl/policy/${after.body.ID}`)).status === 200, 15_000, 50, 'dc1 caught up');
    expect((await auditLines(dc1, 'primary-followed'))[0]).toMatchObject({ Primary: 'dc2', Epoch: 2, Previous: 'dc1' });
    // Its write that never reached dc2 is gone, and named in its audit log.
    expect((await dc1.api('GET', `/v1/acl/policy/${unshipped.body.ID}`)).status).toBe(404);
    await waitFor(async () => (await auditLines(dc1, 'rolled-back')).length > 0, 2000);
    const rolled = (await auditLines(dc1, 'rolled-back')).flatMap((l) => l.Objects as Array<Record<string, unknown>>);
    expect(rolled).toEqual([{ Kind: 'policy', ID: unshipped.body.ID, Hash: unshipped.body.Hash, Deleted: true }]);
    // A global write at dc1 is dc2's now.
    const viaDc1 = await dc1.api('PUT', '/v1/acl/policy', { body: { Name: 'via-old-primary', Rules: 'acl = "read"' } });
    expect(viaDc1.status).toBe(200);
    expect((await dc2.api('GET', `/v1/acl/policy/${viaDc1.body.ID}`)).status).toBe(200);
  }, 90_000);
});
