import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { WatchwordClient } from '../../src/client/index.js';
import { PROTOCOL_VERSION, decodeFrame, encodeFrame, primaryFrame } from '../../src/replication/protocol.js';
import { type TestDaemon, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';

const GLOBAL_MANAGEMENT = '00000000-0000-0000-0000-000000000001';

/** A raw replication stream, recording every frame and how it ended. */
async function openStream(url: string, secret: string) {
  const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/internal/replication?version=${PROTOCOL_VERSION}`, {
    headers: { 'X-Service-Token': secret },
  });
  const frames: Array<ReturnType<typeof decodeFrame<never>>> = [];
  const raw: Buffer[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  ws.on('message', (data: Buffer) => {
    raw.push(data);
    frames.push(decodeFrame(primaryFrame, data) as never);
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  ws.send(encodeFrame({ t: 'hello', v: PROTOCOL_VERSION, datacenter: 'dc9', address: '127.0.0.1:9', logID: null, index: 0, epoch: 1 }));
  return { ws, frames, closed, text: () => Buffer.concat(raw).toString('latin1') };
}

describe('a replication session whose token stops allowing it', () => {
  const daemons: TestDaemon[] = [];
  afterEach(async () => {
    for (const d of daemons.reverse()) await d.close();
    daemons.length = 0;
  });

  it('closes at the commit that deletes its token and never sends what comes after', async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const repl = (await dc1.api('PUT', '/v1/acl/token', { body: { Description: 'replication', Policies: [{ ID: GLOBAL_MANAGEMENT }] } }))
      .body;
    const stream = await openStream(dc1.url, repl.SecretID);
    await waitFor(() => stream.frames.some((f: { t: string; last?: boolean }) => f.t === 'snapshot' && f.last));

    expect((await dc1.api('DELETE', `/v1/acl/token/${repl.AccessorID}`)).body).toBe(true);
    const after = (await dc1.api('PUT', '/v1/acl/token', { body: { Description: 'made after the revocation' } })).body;
    const { code, reason } = await stream.closed;

    expect(code).toBe(4003);
    expect(reason).toBe('replication token revoked: replication token is invalid or lacks acl:write');
    expect(stream.text()).not.toContain(after.SecretID);
    expect(stream.text()).not.toContain(after.AccessorID);
  });

  it('closes when the token loses acl:write (its policy unlinked)', async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const repl = (await dc1.api('PUT', '/v1/acl/token', { body: { Description: 'replication', Policies: [{ ID: GLOBAL_MANAGEMENT }] } }))
      .body;
    const stream = await openStream(dc1.url, repl.SecretID);
    await waitFor(() => stream.frames.some((f: { t: string; last?: boolean }) => f.t === 'snapshot' && f.last));
    expect((await dc1.api('PUT', `/v1/acl/token/${repl.AccessorID}`, { body: { Description: 'demoted' } })).status).toBe(200);
    const after = (await dc1.api('PUT', '/v1/acl/token', { body: { Description: 'made after the demotion' } })).body;
    const { code, reason } = await stream.closed;
    expect(code).toBe(4003);
    expect(reason).toBe('replication token revoked: replication token is invalid or lacks acl:write');
    expect(stream.text()).not.toContain(after.SecretID);
  });

  it('closes when the token expires, without any other commit', async () => {
    const dc1 = await startTestDaemon({ config: { token_min_ttl: '100ms', reap_interval: '1h' }, replication: { heartbeatMs: 100 } });
    daemons.push(dc1);
    const repl = (
      await dc1.api('PUT', '/v1/acl/token', {
        body: { Description: 'short-lived', ExpirationTTL: '1s', Policies: [{ ID: GLOBAL_MANAGEMENT }] },
      })
    ).body;
    const stream = await openStream(dc1.url, repl.SecretID);
    const { code, reason } = await stream.closed;
    expect(code).toBe(4003);
    expect(reason).toBe('replication token revoked: replication token is invalid or lacks acl:write');
  });

  it("shows the reason in the secondary's replication status", async () => {
    const dc1 = await startTestDaemon();
    daemons.push(dc1);
    const repl = (await dc1.api('PUT', '/v1/acl/token', { body: { Description: 'replication', Policies: [{ ID: GLOBAL_MANAGEMENT }] } }))
      .body;
    const dc2 = await startTestDaemon({
      config: secondaryConfig(dc1, {
        replication_token: repl.SecretID,
      }),
      replication: { backoffMinMs: 5000, backoffMaxMs: 5000 },
    });
    daemons.push(dc2);
    const client = new WatchwordClient({ address: dc2.url });
    await waitFor(async () => (await client.replication()).Connected);
    await dc1.api('DELETE', `/v1/acl/token/${repl.AccessorID}`);
    await waitFor(async () => !(await client.replication()).Connected);
    expect((await client.replication()).LastErrorMessage).toBe(
      'connection to the primary closed (4003: replication token revoked: replication token is invalid or lacks acl:write)',
    );
  });
});
