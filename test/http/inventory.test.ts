import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/domain/clock.js';
import type { InventoryResponse } from '../../src/api/status-schemas.js';
import type { TokenRecord } from '../../src/domain/types.js';
import { boundedLabels } from '../../src/observability/metrics.js';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';
import { tokenRecord } from '../helpers/records.js';
import { seeded } from '../helpers/random.js';

/**
 * The inventory (docs/http-api.md, "Inventory") against a brute-force count of the same store:
 * random tokens of random methods, places, roles, policies, localities, expiries, creation times
 * and last uses, some deleted and some reaped, every count compared with one made by reading
 * every token.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.parse('2026-11-29T10:30:00Z');

const inc = (m: Record<string, number>, k: string) => {
  m[k] = (m[k] ?? 0) + 1;
};
const sortedKeys = (m: Record<string, number>) => Object.fromEntries(Object.entries(m).sort(([a], [b]) => (a < b ? -1 : 1)));

describe('the inventory', () => {
  const open: TestDaemon[] = [];
  afterEach(async () => {
    for (const d of open.splice(0)) await d.close();
  });

  for (const seed of [1, 2, 3]) {
    it(`counts what a brute-force count of every token finds (random store ${seed})`, async () => {
      const rnd = seeded(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
      const clock = new ManualClock(T0);
      const d = await startTestDaemon({ clock, config: { reap_interval: '1h' } });
      open.push(d);
      const policy = async (name: string, rules: string) =>
        ((await d.api('PUT', '/v1/acl/policy', { body: { Name: name, Rules: rules } })).body as { ID: string }).ID;
      const writer = await policy('acl-writer', 'acl = "write"');
      const nsWriter = await policy('ns-acl-writer', 'namespace "team-a" { acl = "write" }');
      const reader = await policy('reader', 'service_prefix "" { policy = "read" }');
      const role = async (name: string, ids: string[]) =>
        ((await d.api('PUT', '/v1/acl/role', { body: { Name: name, Policies: ids.map((ID) => ({ ID })) } })).body as { ID: string }).ID;
      const admins = await role('admins', [writer]);
      const readers = await role('readers', [reader]);
      await d.api('PUT', '/v1/acl/quota', { body: { Name: 'team-a', Namespace: 'team-a', MaxTokens: 100_000 } });
      await d.api('PUT', '/v1/acl/quota', { body: { Name: 'ci', AuthMethod: 'ci', Local: true } });

      const now = clock.now();
      const made: TokenRecord[] = [];
      await d.daemon.store.transact((tx) => {
        for (let i = 0; i < 400; i++) {
          const local = rnd() < 0.3;
          const ends = pick([undefined, undefined, now + 20 * 60_000, now + 5 * HOUR, now + 3 * DAY, now - 60_000]);
          const t = tokenRecord({
            Namespace: pick(['default', 'default', 'team-a', 'team-b']),
            Partition: pick(['default', 'default', 'p1']),
            AuthMethod: pick(['', '', 'ci', 'kube']),
            Local: local,
            Policies: rnd() < 0.3 ? [{ ID: pick([writer, nsWriter, reader]) }] : [],
            Roles: rnd() < 0.3 ? [{ ID: pick([admins, readers]) }] : [],
            CreateTime: new Date(now - pick([0, 2 * HOUR, 10 * DAY, 29 * DAY, 31 * DAY, 90 * DAY])).toISOString(),
            ...(ends !== undefined ? { ExpirationTime: new Date(ends).toISOString() } : {}),
          });
          made.push(tx.put('tokens', t));
        }
      });
      const use = (t: TokenRecord) => {
        const used = pick([undefined, undefined, 1 * HOUR, 5 * DAY, 29 * DAY + 23 * HOUR, 31 * DAY, 60 * DAY]);
        if (used !== undefined) d.daemon.store.lastUse.touch(t.AccessorID, now - used);
      };
      // Half the uses before the first ask (which counts what it finds), half after, then tokens made
      // and deleted: from the first ask on the counts are kept as things change, not walked again.
      for (const t of made.slice(0, 200)) use(t);
      expect((await d.api('GET', '/v1/acl/inventory')).status).toBe(200);
      for (const t of made.slice(200)) use(t);
      await d.daemon.store.transact((tx) => {
        for (let i = 0; i < 30; i++)
          made.push(tx.put('tokens', tokenRecord({ CreateTime: new Date(now - pick([0, 3 * HOUR, 31 * DAY])).toISOString() })));
      });
      for (const t of made.slice(400)) use(t);
      // Some deleted through the API, the expired ones reaped.
      for (const t of made.slice(0, 20))
        expect((await d.api('DELETE', `/v1/acl/token/${t.AccessorID}?ns=${t.Namespace}&partition=${t.Partition}`)).status).toBe(200);
      await d.daemon.reaper.reapOnce();

      // The brute force: every token read.
      const tokens = made.map((t) => d.daemon.store.reader.getToken(t.AccessorID)).filter((t): t is TokenRecord => t !== undefined);
      expect(tokens.length).toBeLessThan(410);
      const want: Omit<InventoryResponse, 'Quotas'> = {
        Tokens: 0,
        Local: 0,
        Global: 0,
        ByAuthMethod: {},
        ByRole: {},
        ByPolicy: {},
        ByNamespace: {},
        ByPartition: {},
        ExpiringWithin1h: 0,
        ExpiringWithin24h: 0,
        NeverUsed: 0,
        UnusedFor30d: 0,
        ACLWriteHolders: 0,
      };
      const names: Record<string, string> = {
        [writer]: 'acl-writer',
        [nsWriter]: 'ns-acl-writer',
        [reader]: 'reader',
        [admins]: 'admins',
        [readers]: 'readers',
      };
      const cutoffHour = Math.floor((now - 30 * DAY) / HOUR);
      // The management token made at start-up is a token too.
      const all = [...tokens, ...[d.daemon.store.reader.getToken('00000000-0000-0000-0000-000000000002')!], ...managementTokens(d)];
      for (const t of all) {
        want.Tokens++;
        if (t.Local) want.Local++;
        else want.Global++;
        inc(want.ByAuthMethod, t.AuthMethod);
        for (const r of t.Roles) inc(want.ByRole, names[r.ID] ?? r.ID);
        for (const p of t.Policies) if (names[p.ID]) inc(want.ByPolicy, names[p.ID] as string);
        inc(want.ByNamespace, t.Namespace);
        inc(want.ByPartition, t.Partition);
        const ends = t.ExpirationTime === undefined ? undefined : Date.parse(t.ExpirationTime);
        if (ends !== undefined && ends > now && ends <= now + HOUR) want.ExpiringWithin1h++;
        if (ends !== undefined && ends > now && ends <= now + DAY) want.ExpiringWithin24h++;
        const use = d.daemon.store.lastUse.get(t.AccessorID);
        if (use === undefined) want.NeverUsed++;
        const lastHour = Math.floor((use ?? Date.parse(t.CreateTime)) / HOUR);
        if (lastHour < cutoffHour) want.UnusedFor30d++;
        const grants = t.Policies.some((p) => p.ID === writer || p.ID === nsWriter) || t.Roles.some((r) => r.ID === admins);
        if (grants || t.Policies.some((p) => p.ID === '00000000-0000-0000-0000-000000000001')) want.ACLWriteHolders++;
      }
      const got = (await d.api('GET', '/v1/acl/inventory')).body as InventoryResponse;
      const { Quotas, ...counts } = got;
      const gm = counts.ByPolicy['global-management'];
      delete counts.ByPolicy['global-management'];
      expect(gm).toBe(managementTokens(d).length);
      expect(counts).toEqual({
        ...want,
        ByAuthMethod: sortedKeys(want.ByAuthMethod),
        ByRole: sortedKeys(want.ByRole),
        ByPolicy: sortedKeys(want.ByPolicy),
        ByNamespace: sortedKeys(want.ByNamespace),
        ByPartition: sortedKeys(want.ByPartition),
      });
      const teamA = all.filter((t) => t.Namespace === 'team-a').length;
      const ciLocal = all.filter((t) => t.AuthMethod === 'ci' && t.Local).length;
      expect(Quotas).toEqual([
        { ID: expect.any(String), Name: 'ci', Used: ciLocal },
        { ID: expect.any(String), Name: 'team-a', Used: teamA, MaxTokens: 100_000 },
      ]);

      // The same counts as Prometheus gauges.
      const text = (await d.api('GET', '/v1/agent/metrics?format=prometheus')).text;
      expect(text).toContain(`watchword_inventory_tokens{kind="total"} ${want.Tokens}`);
      expect(text).toContain(`watchword_inventory_tokens{kind="unused_30d"} ${want.UnusedFor30d}`);
      expect(text).toContain(`watchword_inventory_tokens_by{by="namespace",name="team-a"} ${want.ByNamespace['team-a']}`);
      expect(text).toContain(`watchword_quota_tokens{quota="team-a",kind="used"} ${teamA}`);
    });
  }

  it('needs acl:read', async () => {
    const d = await startTestDaemon();
    open.push(d);
    expect((await apiFor(d.url)('GET', '/v1/acl/inventory')).status).toBe(403);
  });

  it('shows at most 100 names of each kind in its metrics, the rest summed as other', () => {
    const counts = Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`m${i}`, i + 1]));
    const labels = boundedLabels({ ...counts, '': 1000 });
    expect(labels).toHaveLength(101);
    expect(labels[0]).toEqual(['(token-api)', 1000]);
    expect(labels[100]).toEqual(['other', (51 * 52) / 2]);
  });
});

/** The management tokens the daemon holds (the initial one, linked to global-management). */
function managementTokens(d: TestDaemon): TokenRecord[] {
  return d.daemon.store.reader
    .tokenIDsBy('policy', '00000000-0000-0000-0000-000000000001')
    .map((id) => d.daemon.store.reader.getToken(id) as TokenRecord);
}
