import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { PrimaryFinder, outranks } from '../../src/ha/primary-finder.js';
import { Placement, type PlacementRecord } from '../../src/replication/placement.js';
import { META } from '../../src/store/schema.js';
import { Transport } from '../../src/transport/transport.js';

const logger = pino({ level: 'silent' });

/** A datacenter that answers GET /v1/internal/primary with `answer`, and records that it was asked. */
async function peer(answer: object) {
  let asked = 0;
  const server = http.createServer((req, res) => {
    if (req.url === '/v1/internal/primary') asked++;
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(answer));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    asked: () => asked,
    close: () => new Promise((r) => server.close(r)),
  };
}

/** A store of metadata only, as the finder uses it. */
function metaStore(meta: Record<string, unknown> = {}) {
  const m = new Map(Object.entries(meta));
  return {
    getMeta: (k: string) => m.get(k),
    transact: async (fn: (tx: { putMeta(k: string, v: unknown): void }) => unknown) => fn({ putMeta: (k, v) => void m.set(k, v) }),
  };
}

describe('finding a newer primary (docs/datacenters.md)', () => {
  const closers: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  const finder = (o: {
    configured: Record<string, string>;
    reported?: Array<{ name: string; address: string }>;
    meta?: Record<string, unknown>;
  }) => {
    const followed: PlacementRecord[] = [];
    const store = metaStore(o.meta);
    const placement = new Placement(store, { datacenter: 'dc1', primaryDatacenter: 'dc1', primaryAddresses: [] });
    const f = new PrimaryFinder({
      datacenter: 'dc1',
      store: store as never,
      placement,
      transport: new Transport({ datacenter: 'dc1', tls: undefined, serverKey: undefined, logger }),
      logger,
      configured: o.configured,
      reported: () => o.reported ?? [],
      primaryHeard: () => true,
      everyMs: 0,
      follow: async (r) => void followed.push(r),
    });
    return { f, followed, store };
  };
  const settle = () => new Promise((r) => setTimeout(r, 300));

  it('follows a configured datacenter that names a newer primary, at the addresses it gives', async () => {
    const dc2 = await peer({ Datacenter: 'dc2', Primary: 'dc2', Epoch: 2, Addresses: ['http://10.0.0.2:8500'] });
    closers.push(dc2.close);
    const { f, followed } = finder({ configured: { dc2: dc2.url } });
    f.poke();
    await settle();
    expect(followed).toEqual([{ Primary: 'dc2', Epoch: 2, Addresses: [dc2.url, 'http://10.0.0.2:8500'] }]);
  });

  it('without TLS, never asks an address a datacenter reported (it could claim any primary)', async () => {
    const trap = await peer({ Datacenter: 'dc9', Primary: 'dc9', Epoch: 99, Addresses: [] });
    closers.push(trap.close);
    const { f, followed } = finder({
      configured: {},
      reported: [{ name: 'dc9', address: new URL(trap.url).host }],
      meta: { [META.knownDatacenters]: { dc9: trap.url } },
    });
    f.poke();
    await settle();
    expect(trap.asked()).toBe(0);
    expect(followed).toEqual([]);
  });

  it('believes a datacenter only about itself under its own name, and follows no lower or equal epoch', async () => {
    const liar = await peer({ Datacenter: 'dc7', Primary: 'dc7', Epoch: 5, Addresses: [] });
    const same = await peer({ Datacenter: 'dc3', Primary: 'dc1', Epoch: 1, Addresses: [] });
    closers.push(liar.close, same.close);
    // dc2's address answers as dc7: not believed.
    const { f, followed } = finder({ configured: { dc2: liar.url, dc3: same.url } });
    f.poke();
    await settle();
    expect(liar.asked()).toBe(1);
    expect(followed).toEqual([]);
  });

  it('settles two primaries of one epoch on the name that sorts first', () => {
    expect(outranks({ Epoch: 2, Primary: 'dc2' }, 2, 'dc3')).toBe(true);
    expect(outranks({ Epoch: 2, Primary: 'dc3' }, 2, 'dc2')).toBe(false);
    expect(outranks({ Epoch: 2, Primary: 'dc2' }, 2, 'dc2')).toBe(false);
    expect(outranks({ Epoch: 3, Primary: 'dc9' }, 2, 'dc1')).toBe(true);
    expect(outranks({ Epoch: 1, Primary: 'dc0' }, 2, 'dc1')).toBe(false);
  });
});
