import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { type Daemon, startDaemon } from '../../src/daemon.js';
import type { PromotionResponse } from '../../src/api/schemas.js';
import { WebSocket } from 'ws';
import { runWatchword } from '../helpers/cli.js';
import { PROTOCOL_VERSION } from '../../src/replication/protocol.js';
import { type Api, MANAGEMENT_SECRET, apiFor, waitFor } from '../helpers/test-daemon.js';
import { loggedLines } from '../helpers/log-lines.js';
import { tempDir } from '../helpers/temp-dir.js';
import { freePort } from '../../src/testing/etcd.js';

/** Short timings: a silent primary is noticed in ~1 s, other datacenters are asked every 200 ms. */
const REPLICATION = { heartbeatMs: 200, deadPeerMs: 1000, backoffMinMs: 100, backoffMaxMs: 300, primaryProbeMs: 200 };

interface Dc {
  name: string;
  dir: string;
  daemon: Daemon;
  api: Api;
}

const ports: Record<string, number> = {};
const url = (name: string): string => `http://127.0.0.1:${ports[name]}`;

async function start(name: string, dir: string, replication: Partial<typeof REPLICATION> = {}, lines?: string[]): Promise<Dc> {
  const others = Object.keys(ports).filter((n) => n !== name);
  const config = loadConfig({
    flags: {
      http_addr: `127.0.0.1:${ports[name]}`,
      // The other datacenters, where each asks which primary they follow (docs/datacenters.md).
      datacenter_addresses: others.map((n) => `${n}=${url(n)}`).join(','),
      data_dir: dir,
      datacenter: name,
      primary_datacenter: 'dc1',
      ...(name !== 'dc1' ? { primary_address: url('dc1') } : { initial_management_token: MANAGEMENT_SECRET }),
      // Every datacenter may follow another one day: each has a replication token.
      replication_token: MANAGEMENT_SECRET,
      log_level: 'silent',
      node_name: `${name}-node`,
    },
  });
  const daemon = await startDaemon(config, {
    logger: lines
      ? loggedLines('info', { dc: name }, lines).logger
      : pino({ level: process.env.WATCHWORD_TEST_LOG_LEVEL ?? 'silent', base: { dc: name } }),
    replication: { ...REPLICATION, ...replication },
  });
  return { name, dir, daemon, api: apiFor(daemon.url, MANAGEMENT_SECRET) };
}

/** The same datacenter again, on its data dir and port. */
const restart = (dc: Dc, lines?: string[]): Promise<Dc> => start(dc.name, dc.dir, {}, lines);

/** A `watchword` command line against a datacenter, in this process. */
const watchword = (dc: Dc, args: string[]) => runWatchword([...args, '-http-addr', dc.daemon.url, '-token', MANAGEMENT_SECRET]);

/** This server's audit events of `type` (GET /v1/operator/audit), oldest first. */
async function auditLines(dc: Dc, type: string): Promise<Array<Record<string, unknown>>> {
  const page = await dc.api('GET', `/v1/operator/audit?type=${type}&limit=1000`);
  return [...((page.body?.Events ?? []) as Array<Record<string, unknown>>)].reverse();
}

describe('losing the primary datacenter (docs/datacenters.md)', () => {
  const dirs: Array<{ path: string; remove(): Promise<void> }> = [];
  let dc1: Dc;
  let dc2: Dc;
  let dc3: Dc;
  const running = new Set<Dc>();

  beforeAll(async () => {
    for (const name of ['dc1', 'dc2', 'dc3']) {
      dirs.push(await tempDir());
      ports[name] = await freePort();
    }
    dc1 = await start('dc1', dirs[0]!.path);
    dc2 = await start('dc2', dirs[1]!.path);
    dc3 = await start('dc3', dirs[2]!.path);
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

    // Promotion while dc2 still hears dc1 needs force (the CLI says so, and nothing changes).
    const refused = await watchword(dc2, ['operator', 'primary', 'promote']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('still hears the primary dc1');
    expect(refused.stderr).toContain('-force');
    expect((await dc2.api('GET', '/v1/operator/primary')).body).toMatchObject({ Datacenter: 'dc1', Epoch: 1 });
    // Only operator:write may promote.
    const reader = (await dc1.api('PUT', '/v1/acl/token', { body: { Description: 'operator reader' } })).body;
    await waitFor(async () => (await dc2.api('GET', `/v1/acl/token/${reader.AccessorID}`)).status === 200, 5000);
    expect((await apiFor(dc2.daemon.url, reader.SecretID)('PUT', '/v1/operator/primary?promote')).status).toBe(403);
    expect((await dc2.api('PUT', '/v1/operator/primary')).status).toBe(400);

    // dc2 and dc3 go (a partition); dc1 acknowledges a write neither got, and is then lost too.
    for (const d of [dc2, dc3]) {
      await d.daemon.close();
      running.delete(d);
    }
    const unshipped = await dc1.api('PUT', '/v1/acl/policy', { body: { Name: 'unshipped', Rules: 'acl = "read"' } });
    expect(unshipped.status).toBe(200);
    await dc1.daemon.close();
    running.delete(dc1);
    dc2 = await restart(dc2);
    dc3 = await restart(dc3);
    running.add(dc2);
    running.add(dc3);

    const run = await watchword(dc2, ['operator', 'primary', 'promote', '-format', 'json']);
    expect(run.code).toBe(0);
    const promoted = { status: 200, body: JSON.parse(run.stdout) as PromotionResponse };
    expect(promoted.body).toMatchObject({ Datacenter: 'dc2', Epoch: 2, PreviousPrimary: 'dc1', PreviousEpoch: 1, Forced: false });
    // The recovery point: the unshipped write lies after it, as the answer warns.
    expect(promoted.body.LastIndex).toBeLessThan(Number(unshipped.headers.get('x-service-index')));
    expect(promoted.body.Warning).toContain('may be lost');
    expect(Date.parse(promoted.body.LastContact ?? '')).toBeGreaterThan(Date.now() - 60_000);
    await waitFor(async () => (await auditLines(dc2, 'primary-promoted')).length > 0, 2000);
    expect((await auditLines(dc2, 'primary-promoted'))[0]).toMatchObject({
      Epoch: 2,
      PreviousPrimary: 'dc1',
      LastIndex: promoted.body.LastIndex,
    });
    expect((await dc2.api('PUT', '/v1/operator/primary?promote')).status).toBe(409);

    // dc2 takes global writes at once (a delete of what dc1 held too: the new primary's change, not a rollback at dc1);
    // dc3 learns of epoch 2 and follows dc2 without a restart.
    expect((await dc2.api('DELETE', `/v1/acl/policy/${before.ID}`)).status).toBe(200);
    const after = await dc2.api('PUT', '/v1/acl/policy', { body: { Name: 'after-promotion', Rules: 'acl = "read"' } });
    expect(after.status).toBe(200);
    expect((await dc2.api('GET', '/v1/operator/primary')).body).toMatchObject({ Datacenter: 'dc2', Epoch: 2 });
    // What the agent says of itself follows (a promotion is not a configuration change).
    expect((await dc2.api('GET', '/v1/agent/self')).body.Config).toMatchObject({
      Datacenter: 'dc2',
      PrimaryDatacenter: 'dc2',
      Role: 'primary',
    });
    await waitFor(async () => (await dc3.api('GET', `/v1/acl/policy/${after.body.ID}`)).status === 200, 15_000, 50, 'dc3 follows dc2');
    expect((await dc3.api('GET', '/v1/operator/primary')).body).toMatchObject({ Datacenter: 'dc2', Epoch: 2 });
    // A bootstrap at a secondary names the primary of now.
    expect((await dc3.api('PUT', '/v1/acl/bootstrap')).body.message).toContain('send it to dc2');
    // A global write at dc3 goes to dc2 now.
    const viaDc3 = await dc3.api('PUT', '/v1/acl/token', { body: { Description: 'global via dc3' } });
    expect(viaDc3.status).toBe(200);
    expect((await dc2.api('GET', `/v1/acl/token/${viaDc3.body.AccessorID}`)).status).toBe(200);
    // Local tokens survived every step.
    expect((await dc2.api('GET', `/v1/acl/token/${local2.AccessorID}`)).status).toBe(200);
    expect((await dc3.api('GET', `/v1/acl/token/${local3.AccessorID}`)).status).toBe(200);
    expect((await dc3.api('GET', '/v1/catalog/datacenters')).body[0]).toBe('dc2');

    // The old primary returns: it learns of epoch 2, stops taking global writes and rejoins as dc2's secondary.
    dc1 = await restart(dc1);
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
    // Started again with its old configuration (primary_datacenter dc1), it says at once whom it follows, and how to change that.
    await dc1.daemon.close();
    running.delete(dc1);
    const lines: string[] = [];
    dc1 = await restart(dc1, lines);
    running.add(dc1);
    const notice = lines.find((l) => l.includes("the store's placement outranks primary_datacenter dc1"));
    expect(notice).toContain('this datacenter follows dc2 as its primary');
    expect(notice).toContain('`watchword operator primary transfer -to dc1`');
    expect(JSON.parse(notice ?? '{}')).toMatchObject({ level: 40, primary: 'dc2', epoch: 2, configured: 'dc1' });
  }, 90_000);

  it('hands the primary role back by a planned transfer under write load: nothing acknowledged is lost', async () => {
    await waitFor(async () => (await dc2.api('GET', '/v1/acl/replication')).body.Secondaries?.length === 2, 15_000, 50, 'both connected');
    // Writers at the primary and through a secondary, until the transfer is over.
    const acknowledged: string[] = [];
    const refusals: Array<{ status: number; code: string | null; retryAfter: string | null }> = [];
    let writing = true;
    const writer = async (dc: () => Dc, prefix: string) => {
      for (let i = 0; writing && i < 2000; i++) {
        const res = await dc().api('PUT', '/v1/acl/policy', { body: { Name: `${prefix}-${i}`, Rules: 'acl = "read"' } });
        if (res.status === 200) acknowledged.push(res.body.ID as string);
        else
          refusals.push({ status: res.status, code: res.headers.get('x-service-error-code'), retryAfter: res.headers.get('retry-after') });
      }
    };
    // And Local tokens at the primary being handed over: they never wait.
    const locals: string[] = [];
    const localRefusals: number[] = [];
    const localWriter = async () => {
      for (let i = 0; writing && i < 2000; i++) {
        const res = await dc2.api('PUT', '/v1/acl/token', { body: { Local: true, Description: `local during the transfer ${i}` } });
        if (res.status === 200) locals.push(res.body.AccessorID as string);
        else localRefusals.push(res.status);
      }
    };
    const writers = [writer(() => dc2, 'load-dc2'), writer(() => dc3, 'load-dc3'), localWriter()];
    await waitFor(() => acknowledged.length >= 20, 15_000);

    // Needs operator:write and acl:write, at the primary, to a connected secondary.
    const operatorOnly = (
      await dc2.api('PUT', '/v1/acl/token', {
        body: {
          Policies: [
            { ID: (await dc2.api('PUT', '/v1/acl/policy', { body: { Name: 'operator-only', Rules: 'operator = "write"' } })).body.ID },
          ],
        },
      })
    ).body;
    const withoutAclWrite = await apiFor(dc2.daemon.url, operatorOnly.SecretID)('PUT', '/v1/operator/primary?transfer=dc1');
    expect([withoutAclWrite.status, withoutAclWrite.body.message]).toEqual([
      403,
      `Permission denied: token with AccessorID '${operatorOnly.AccessorID}' lacks permission 'acl:write'; decided by the default policy: default_policy = "deny"`,
    ]);
    expect((await dc2.api('GET', '/v1/operator/primary')).body).toMatchObject({ Datacenter: 'dc2', Epoch: 2 });
    expect((await dc2.api('PUT', '/v1/operator/primary?transfer=dc9')).status).toBe(409);
    expect((await dc3.api('PUT', '/v1/operator/primary?transfer=dc1')).status).toBe(409);
    const transferred = await watchword(dc2, ['operator', 'primary', 'transfer', '-to', 'dc1', '-format', 'json']);
    expect(transferred.stderr).toBe('');
    const handed = { status: 200, body: JSON.parse(transferred.stdout) as PromotionResponse };
    expect(handed.body).toMatchObject({ Datacenter: 'dc1', Epoch: 3, PreviousPrimary: 'dc2', PreviousEpoch: 2, Forced: false });
    // Writes waited for dc1's catch-up and the handover only (docs/datacenters.md: at most that and 2 s).
    expect(handed.body.WritesPausedMs).toBeLessThan(12_000);
    await new Promise((r) => setTimeout(r, 300));
    writing = false;
    await Promise.all(writers);

    // Every datacenter follows dc1 at epoch 3; every acknowledged write is there and everywhere.
    for (const d of [dc1, dc2, dc3])
      await waitFor(async () => (await d.api('GET', '/v1/operator/primary')).body.Epoch === 3, 15_000, 50, `${d.name} follows epoch 3`);
    expect((await dc2.api('GET', '/v1/operator/primary')).body.Datacenter).toBe('dc1');
    expect(acknowledged.length).toBeGreaterThanOrEqual(20);
    const last = acknowledged.at(-1) as string;
    for (const d of [dc1, dc2, dc3]) await waitFor(async () => (await d.api('GET', `/v1/acl/policy/${last}`)).status === 200, 15_000);
    const atNewPrimary = new Set(((await dc1.api('GET', '/v1/acl/policies')).body as Array<{ ID: string }>).map((p) => p.ID));
    expect(acknowledged.filter((id) => !atNewPrimary.has(id))).toEqual([]);
    // A write refused meanwhile said why and when to retry.
    for (const r of refusals.filter((x) => x.code === 'PRIMARY_TRANSFER'))
      expect(r).toEqual({ status: 503, code: 'PRIMARY_TRANSFER', retryAfter: '1' });
    expect(localRefusals).toEqual([]);
    expect(locals.length).toBeGreaterThan(0);
    for (const id of locals.slice(-5)) expect((await dc2.api('GET', `/v1/acl/token/${id}`)).status).toBe(200);
    // No write is rolled back by a planned transfer.
    expect(await auditLines(dc2, 'rolled-back')).toEqual([]);
  }, 90_000);
});

describe('a stale old primary (docs/datacenters.md): nothing of it overwrites the new primary', () => {
  const dirs: Array<{ path: string; remove(): Promise<void> }> = [];
  const running: Dc[] = [];
  afterAll(async () => {
    for (const d of running) await d.daemon.close().catch(() => undefined);
    for (const d of dirs) await d.remove();
  });

  it('refuses its forwarded writes at both doors (409 STALE_PRIMARY), learns from them and steps down, its own write rolled back', async () => {
    for (const name of ['dc1', 'dc2', 'dc3']) {
      dirs.push(await tempDir());
      ports[name] = await freePort();
    }
    // dc1 does not ask the others on its own: it stays stale until something tells it.
    const dc1 = await start('dc1', dirs[0]!.path, { primaryProbeMs: 0 });
    const dc2 = await start('dc2', dirs[1]!.path);
    const dc3 = await start('dc3', dirs[2]!.path);
    running.push(dc1, dc2, dc3);
    for (const d of [dc2, dc3]) await waitFor(async () => (await d.api('GET', '/v1/acl/replication')).body.Connected === true, 10_000);

    // dc2 is promoted while dc1 still runs (forced): dc3 learns of epoch 2 and follows dc2.
    const forced = await dc2.api<PromotionResponse>('PUT', '/v1/operator/primary?promote&force');
    expect(forced.status).toBe(200);
    expect(forced.body).toMatchObject({ Epoch: 2, Forced: true });
    await waitFor(async () => (await dc3.api('GET', '/v1/operator/primary')).body.Datacenter === 'dc2', 15_000, 50, 'dc3 follows dc2');
    expect((await dc1.api('GET', '/v1/operator/primary')).body).toMatchObject({ Datacenter: 'dc1', Epoch: 1 });

    // What dc1 still takes from its own clients reaches nobody.
    const stale = await dc1.api('PUT', '/v1/acl/policy', { body: { Name: 'stale-write', Rules: 'acl = "read"' } });
    expect(stale.status).toBe(200);
    const fresh = await dc2.api('PUT', '/v1/acl/policy', { body: { Name: 'stale-write', Rules: 'acl = "write"' } });
    expect(fresh.status).toBe(200);
    // Writes forwarded by a datacenter that has seen epoch 2 are refused at dc1, whichever door they come by (sent together:
    // the first refusal tells dc1, which then asks the others and steps down).
    const forwarded = await Promise.all(
      (
        [
          ['PUT', '/v1/acl/token', { Description: 'forwarded' }],
          ['PUT', '/v1/acl/policy', { Name: 'forwarded', Rules: 'acl = "read"' }],
          ['DELETE', `/v1/acl/policy/${stale.body.ID}`, undefined],
        ] as const
      ).map(([method, path, body]) => dc1.api(method, path, { ...(body ? { body } : {}), headers: { 'X-Service-Primary-Epoch': '2' } })),
    );
    expect(forwarded.map((r) => [r.status, r.body.code])).toEqual(Array(3).fill([409, 'STALE_PRIMARY']));
    await waitFor(async () => (await dc1.api('GET', '/v1/operator/primary')).body.Datacenter === 'dc2', 15_000, 50, 'dc1 follows dc2');
    // Once it follows dc2, a replication stream to it is refused: it is a secondary.
    const ws = new WebSocket(`${dc1.daemon.url.replace('http', 'ws')}/v1/internal/replication?version=${PROTOCOL_VERSION}`, {
      headers: { 'X-Service-Token': MANAGEMENT_SECRET },
    });
    const refusedUpgrade = await new Promise<number>((resolve) => {
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.once('open', () => resolve(101));
      ws.once('error', () => resolve(0));
    });
    ws.terminate();
    expect(refusedUpgrade).toBe(400);
    // Everywhere, the new primary's write stands; dc1's stale one is rolled back and named in its audit log.
    for (const d of [dc1, dc2, dc3])
      await waitFor(
        async () => (await d.api('GET', '/v1/acl/policy/name/stale-write')).body?.Rules === 'acl = "write"',
        15_000,
        50,
        `${d.name} holds dc2's policy`,
      );
    await waitFor(async () => (await auditLines(dc1, 'rolled-back')).length > 0, 5000);
    const rolled = (await auditLines(dc1, 'rolled-back')).flatMap((l) => l.Objects as Array<Record<string, unknown>>);
    expect(rolled).toEqual([{ Kind: 'policy', ID: stale.body.ID, Hash: stale.body.Hash, Deleted: true }]);
    // A global write at dc1 now goes to dc2.
    const via = await dc1.api('PUT', '/v1/acl/token', { body: { Description: 'through the old primary' } });
    expect(via.status).toBe(200);
    expect((await dc2.api('GET', `/v1/acl/token/${via.body.AccessorID}`)).status).toBe(200);
  }, 60_000);
});
