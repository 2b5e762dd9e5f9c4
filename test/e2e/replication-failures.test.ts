import { rm } from 'node:fs/promises';
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { WatchwordApiError, WatchwordClient } from '../../src/client/index.js';
import { PROTOCOL_VERSION, encodeFrame } from '../../src/replication/protocol.js';
import { REPLICATION_PROTOCOL, VERSION } from '../../src/version.js';
import { type Cluster, startCluster } from '../../src/testing/index.js';
import { type TestDaemon, apiFor, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';
import { globalState, localTokens } from '../helpers/cluster.js';
import { loggedLines } from '../helpers/log-lines.js';

describe('replication catch-up by snapshot', () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  it('sends a snapshot to a secondary whose cursor fell out of the retained log; its Local tokens survive', async () => {
    cluster = await startCluster({ datacenters: ['dc1', 'dc2'], config: { log_retention: 10 } });
    const dc1 = cluster.primary.client;
    const dc2 = cluster.get('dc2');
    const keep = await dc1.policies.create({ Name: 'keep' });
    const doomed = await dc1.policies.create({ Name: 'doomed' });
    const locals = [
      await dc2.client.tokens.create({ Local: true, Description: 'local 1' }),
      await dc2.client.tokens.create({ Local: true, Description: 'local 2', Policies: [{ ID: keep.ID }] }),
    ];
    await cluster.waitForReplication();
    await dc2.stop();
    // Far more changes than the primary retains, including a delete the secondary must notice.
    for (let i = 0; i < 40; i++) await dc1.tokens.create({ Description: `while away ${i}` });
    await dc1.policies.delete(doomed.ID);
    await dc1.policies.update(keep.ID, { Name: 'keep', Description: 'changed while away' });
    await waitFor(async () => /watchword_index (\d+)/.test(await dc1.agent.metrics()), 1000);
    await dc2.start();
    await cluster.waitForReplication();
    expect(dc2.output()).not.toContain('"level":"error"');
    expect(await globalState(dc2.client)).toEqual(await globalState(dc1));
    await expect(dc2.client.policies.read(doomed.ID)).rejects.toMatchObject({ status: 404 });
    expect((await dc2.client.policies.read(keep.ID)).value.Description).toBe('changed while away');
    expect(await localTokens(dc2.client)).toEqual(locals.map((t) => t.AccessorID).sort());
    expect((await dc2.client.tokens.readSelf({ token: locals[1]!.SecretID })).value.Policies).toEqual([{ ID: keep.ID, Name: 'keep' }]);
  }, 90_000);

  it('converges with a primary whose data dir was wiped and rebuilt (new log identity)', async () => {
    cluster = await startCluster({ datacenters: ['dc1', 'dc2'] });
    const dc1 = cluster.primary;
    const dc2 = cluster.get('dc2');
    const old = await dc1.client.policies.create({ Name: 'from-old-primary' });
    const local = await dc2.client.tokens.create({ Local: true, Description: 'survives' });
    await cluster.waitForReplication();
    const oldLog = (await dc1.client.agent.index()).LogID;
    await dc1.kill();
    await rm(dc1.dataDir, { recursive: true, force: true });
    await dc1.start();
    expect((await dc1.client.agent.index()).LogID).not.toBe(oldLog);
    const fresh = await dc1.client.policies.create({ Name: 'from-new-primary' });
    await cluster.waitForReplication(40_000);
    expect(await globalState(dc2.client)).toEqual(await globalState(dc1.client));
    await expect(dc2.client.policies.read(old.ID)).rejects.toMatchObject({ status: 404 });
    expect((await dc2.client.policies.read(fresh.ID)).value.Name).toBe('from-new-primary');
    expect(await localTokens(dc2.client)).toEqual([local.AccessorID]);
  }, 90_000);
});

describe('replication token problems', () => {
  const daemons: TestDaemon[] = [];
  afterEach(async () => {
    for (const d of daemons.reverse()) await d.close();
    daemons.length = 0;
  });

  it('reports why it cannot replicate, in its status, its health and its log, and applies nothing', async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const readOnly = (await dc1.api('PUT', '/v1/acl/policy', { body: { Name: 'ro', Rules: 'acl = "read"' } })).body;
    const weak = (await dc1.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: readOnly.ID }] } })).body.SecretID as string;
    const cases: Array<[string, string | undefined, string]> = [
      // One message for both: the primary does not tell an unknown secret from a real token (its log says which).
      ['dc2', weak, 'replication token is invalid or lacks acl:write'],
      ['dc3', crypto.randomUUID(), 'replication token is invalid or lacks acl:write'],
      ['dc4', undefined, 'no replication token configured'],
    ];
    for (const [dc, token, message] of cases) {
      const { logger, lines } = loggedLines();
      const d = await startTestDaemon({
        logger,
        config: secondaryConfig(dc1, {
          datacenter: dc,
          // None given: the secondary has no replication token.
          replication_token: token,
        }),
        replication: { backoffMinMs: 100, backoffMaxMs: 200 },
      });
      daemons.push(d);
      const client = new WatchwordClient({ address: d.url });
      await waitFor(async () => (await client.replication()).LastErrorMessage.includes(message), 5000).catch(async (err: Error) => {
        throw new Error(`${dc}: ${err.message}; status ${JSON.stringify(await client.replication())}`);
      });
      const status = await client.replication();
      expect(status.Connected).toBe(false);
      expect(status.ReplicatedIndex).toBe(0);
      expect(status.LastErrorMessage).toContain(message);
      expect(d.daemon.store.count('policies')).toBe(0);
      expect(d.daemon.store.count('tokens')).toBe(0);
      // Not a server that can do its job: the health check says so.
      const health = await apiFor(d.url)('GET', '/v1/agent/health');
      expect(health.status).toBe(503);
      expect(health.body.Checks).toContainEqual({ Name: 'replication', Passing: false });
      // Why, anonymously, as /v1/acl/replication says it above; and in the log, once.
      const logged = lines.filter((l) => l.includes(message) && l.includes('"level":40'));
      expect(logged.length, lines.join('')).toBe(1);
    }
  });

  it('passes the replication check once a secondary replicates, and fails it while its last error is newer', async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const dc2 = await startTestDaemon({ config: secondaryConfig(dc1), replication: { backoffMinMs: 100, backoffMaxMs: 200 } });
    daemons.push(dc2);
    const check = async () =>
      (
        (await apiFor(dc2.url, dc1.management)('GET', '/v1/agent/health')).body.Checks as Array<{
          Name: string;
          Passing: boolean;
          Output: string;
        }>
      ).find((c) => c.Name === 'replication');
    await waitFor(async () => (await check())?.Passing === true, 10_000);
    expect((await check())?.Output).toMatch(/^replicating from dc1: index \d+, last success /);
    // The primary gone: the connection's end is an error newer than the last success.
    await dc1.close();
    daemons.splice(daemons.indexOf(dc1), 1);
    await waitFor(async () => (await check())?.Passing === false, 10_000);
    expect((await check())?.Output).toMatch(/^replication from dc1 failing since .*: /);
    expect((await apiFor(dc2.url)('GET', '/v1/agent/health')).status).toBe(503);
  });

  it('answers a forwarded write after 5 s with X-Service-Replication-Pending when the change does not come back', async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const readOnly = (await dc1.api('PUT', '/v1/acl/policy', { body: { Name: 'ro-pending', Rules: 'acl = "read"' } })).body;
    const weak = (await dc1.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: readOnly.ID }] } })).body.SecretID as string;
    // dc2 cannot replicate (its token lacks acl:write), but the caller's own token is good on the primary.
    const dc2 = await startTestDaemon({
      config: secondaryConfig(dc1, {
        replication_token: weak,
      }),
    });
    daemons.push(dc2);
    const started = Date.now();
    const res = await apiFor(dc2.url, dc1.management)('PUT', '/v1/acl/policy', { body: { Name: 'written-through-dc2' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-service-replication-pending')).toBe('true');
    expect(res.body.Name).toBe('written-through-dc2');
    expect(Date.now() - started).toBeGreaterThanOrEqual(4900);
    // The write happened on the primary.
    expect((await dc1.api('GET', `/v1/acl/policy/${res.body.ID}`)).status).toBe(200);
  }, 20_000);

  it('closes a connection that sends a malformed frame, applies nothing, and keeps serving', async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const before = dc1.daemon.store.currentIndex();
    for (const garbage of [
      Buffer.from([0xc1, 0xff, 0x00]),
      encodeFrame({ t: 'ack', index: -5 } as never),
      Buffer.from(JSON.stringify({ t: 'hello' })),
    ]) {
      const ws = new WebSocket(`${dc1.url.replace('http', 'ws')}/v1/internal/replication?version=${PROTOCOL_VERSION}`, {
        headers: { 'X-Service-Token': dc1.management },
      });
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
      ws.send(garbage);
      expect(await closed).toBe(1008);
    }
    expect(dc1.daemon.store.currentIndex()).toBe(before);
    expect((await dc1.api('GET', '/v1/acl/tokens')).status).toBe(200);
  });

  it('refuses a secondary speaking another protocol version with a clear message', async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.get(`${dc1.url}/v1/internal/replication?version=99`, {
        headers: {
          Connection: 'Upgrade',
          Upgrade: 'websocket',
          'Sec-WebSocket-Version': '13',
          'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
          'X-Service-Token': dc1.management,
        },
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on('upgrade', () => reject(new Error('upgraded although the version is wrong')));
      req.on('error', reject);
    });
    expect(status).toBe(426);
    // Both ranges named: the secondary's and the primary's.
    expect(body).toContain(
      `unsupported replication protocol: the secondary speaks 99, this primary (${VERSION}) speaks ${REPLICATION_PROTOCOL.min}-${REPLICATION_PROTOCOL.max}`,
    );
  });
});

describe('a frozen primary (socket open, nothing sent)', () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    const pid = cluster?.primary.pid;
    if (pid) process.kill(pid, 'SIGCONT');
    await cluster?.stop();
    cluster = undefined;
  });

  it('is noticed by the heartbeat within 10 s, and replication resumes once it wakes', async () => {
    cluster = await startCluster({ datacenters: ['dc1', 'dc2'] });
    await cluster.waitForReplication();
    const dc2 = cluster.get('dc2');
    process.kill(cluster.primary.pid as number, 'SIGSTOP');
    const frozenAt = Date.now();
    await waitFor(async () => !(await dc2.replication()).Connected, 12_000, 100);
    const noticedMs = Date.now() - frozenAt;
    expect(noticedMs).toBeLessThan(10_000);
    expect((await dc2.replication()).LastErrorMessage).toMatch(/silent|reach|closed/);
    process.kill(cluster.primary.pid as number, 'SIGCONT');
    const p = await cluster.primary.client.policies.create({ Name: 'after-thaw' });
    await cluster.waitForReplication(40_000);
    expect((await dc2.client.policies.read(p.ID)).value.Name).toBe('after-thaw');
  }, 90_000);
});

describe('primary down', () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  it('keeps reads and Local writes working at a secondary, answers global writes 503 fast, and resumes by itself', async () => {
    cluster = await startCluster({ datacenters: ['dc1', 'dc2'] });
    const dc1 = cluster.primary;
    const dc2 = cluster.get('dc2');
    const policy = await dc1.client.policies.create({ Name: 'before-outage' });
    const global = await dc1.client.tokens.create({ Description: 'readable during outage', Policies: [{ ID: policy.ID }] });
    await cluster.waitForReplication();
    await dc1.kill();

    expect((await dc2.client.tokens.read(global.AccessorID)).value.Hash).toBe(global.Hash);
    expect((await dc2.client.tokens.readSelf({ token: global.SecretID })).value.AccessorID).toBe(global.AccessorID);
    const local = await dc2.client.tokens.create({ Local: true, Description: 'made during outage', Policies: [{ Name: 'before-outage' }] });
    const updated = await dc2.client.tokens.update(local.AccessorID, { Local: true, Description: 'updated during outage' });
    expect(updated.Description).toBe('updated during outage');
    const cloned = await dc2.client.tokens.clone(local.AccessorID);
    expect(await dc2.client.tokens.delete(cloned.AccessorID)).toBe(true);

    for (const write of [
      () => dc2.client.tokens.create({ Description: 'global during outage' }),
      () => dc2.client.policies.create({ Name: 'during-outage' }),
      () => dc2.client.roles.create({ Name: 'during-outage' }),
      () => dc2.client.tokens.update(global.AccessorID, { Description: 'x' }),
    ]) {
      const started = Date.now();
      const err = await write().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WatchwordApiError);
      expect((err as WatchwordApiError).status).toBe(503);
      expect((err as WatchwordApiError).code).toBe('PRIMARY_UNAVAILABLE');
      expect(Date.now() - started).toBeLessThan(5000);
    }
    const consistent = await dc2.client.tokens.list({}, { consistency: 'consistent' }).catch((e: WatchwordApiError) => e);
    expect((consistent as WatchwordApiError).status).toBe(503);

    await dc1.start();
    const after = await dc1.client.policies.create({ Name: 'after-outage' });
    await waitFor(async () => (await dc2.replication()).Connected, 40_000, 200);
    await cluster.waitForReplication();
    expect((await dc2.client.policies.read(after.ID)).value.Name).toBe('after-outage');
    expect(await globalState(dc2.client)).toEqual(await globalState(dc1.client));
    expect(await localTokens(dc2.client)).toEqual([local.AccessorID]);
  }, 90_000);
});
