import { type Server, createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { Transport } from '../../src/transport/transport.js';
import { afterEach, describe, expect, it } from 'vitest';
import { StaticCoordinator } from '../../src/ha/coordinator.js';
import { ServerGroup } from '../../src/ha/servers.js';
import { LevelStore } from '../../src/store/level-store.js';
import { tempDir } from '../helpers/temp-dir.js';

// A follower whose named leader refuses its stream: the symptom of a leader key that
// outlived its leadership. Past a lease time it is reported in the operator view.

const logger = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('ServerGroup (a follower’s view of its leader)', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('reports a named leader that refuses its stream for longer than a lease', async () => {
    // The "leader": answers every stream upgrade as a server that no longer leads.
    const refusing: Server = createServer((_req, res) => res.writeHead(404).end());
    refusing.on('upgrade', (_req, socket) => {
      // A client that resets the refused connection must not end this test process (an unheard ECONNRESET).
      socket.on('error', () => undefined);
      socket.end('HTTP/1.1 421 Misdirected Request\r\nContent-Type: text/plain\r\n\r\nthis server is a follower and no leader is known');
    });
    await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise((r) => refusing.close(() => r())));
    const leaderAddress = `127.0.0.1:${(refusing.address() as { port: number }).port}`;

    const dir = await tempDir();
    cleanup.push(dir.remove);
    const store = await LevelStore.open(dir.path, { durability: 'fsync', changeLog: true });
    cleanup.push(() => store.close());
    const self = { name: 'me', address: '127.0.0.1:1' };
    const group = serverGroup(store, new StaticCoordinator(self, [{ name: 'leader', address: leaderAddress }, self]), self);
    await group.start();
    cleanup.push(() => group.stop());
    expect(group.status().Problem).toBeNull();
    await sleep(1000);
    const view = group.status();
    // Never proven, so not named as the leader; the problem says who the coordinator names.
    expect(view.Leader).toBeNull();
    expect(view.Problem).toMatch(
      /^the leader named in the coordinator \(leader\) has refused this server's stream for \d+ s: the leader refused the stream \(421\): this server is a follower and no leader is known$/,
    );
  });

  it('a leader that stops takes no write from then on: it is not a lone server, and its successor would never hold one', async () => {
    const dir = await tempDir();
    cleanup.push(dir.remove);
    const store = await LevelStore.open(dir.path, { durability: 'fsync', changeLog: true });
    cleanup.push(() => store.close());
    const self = { name: 'me', address: '127.0.0.1:1' };
    // The first of the servers leads for good (no coordinator): this one, with a follower that never comes.
    const group = serverGroup(store, new StaticCoordinator(self, [self, { name: 'other', address: '127.0.0.1:2' }]), self);
    await group.start();
    expect(group.isLeader()).toBe(true);
    await store.transact((tx) => tx.putMeta('before', 1));
    await group.stop();
    // What the daemon's HTTP listener would still pass on while it closes: refused, nothing written.
    const index = store.currentIndex();
    await expect(store.transact((tx) => tx.putMeta('after', 1))).rejects.toMatchObject({ code: 'NO_LEADER' });
    expect(store.currentIndex()).toBe(index);
    expect(store.getMeta('after')).toBeUndefined();
  });
});

/** The server `self` of dc1, with short timings, under `coordinator`. */
function serverGroup(store: LevelStore, coordinator: StaticCoordinator, self: { name: string; address: string }): ServerGroup {
  return new ServerGroup(store, coordinator, {
    name: 'me',
    datacenter: 'dc1',
    address: () => self.address,
    transport: new Transport({ datacenter: 'dc1', tls: undefined, serverKey: randomBytes(32), logger }),
    syncFollowers: 1,
    syncTimeoutMs: 1000,
    leaseMs: 600,
    heartbeatMs: 200,
    deadPeerMs: 2000,
    backoffMinMs: 50,
    backoffMaxMs: 100,
    tailBatches: 100,
    logger,
    onLead: async () => undefined,
    onFollow: async () => undefined,
  });
}
