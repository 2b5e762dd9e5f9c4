import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedTo } from '../../src/testing/seed.js';
import { WatchwordClient } from '../../src/client/client.js';
import { type ApiResponse, MANAGEMENT_SECRET, type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

/**
 * Paged lists (docs/http-api.md, "Paged lists"): `?per_page=N` answers at most N items and
 * `X-Service-Next-Cursor` while more remain; the pages, followed by their cursors, are the whole
 * list in its order, with every filter; writes between pages neither repeat nor skip the items
 * that were there throughout; bad values are 400.
 */

type Item = { AccessorID?: string; ID?: string };
const idOf = (x: Item) => x.AccessorID ?? x.ID;

describe('paged lists', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
    for (let i = 0; i < 23; i++) {
      const body = i % 3 === 0 ? { Description: `web ${i}`, ServiceIdentities: [{ ServiceName: 'web' }] } : { Description: `t ${i}` };
      expect((await d.api('PUT', '/v1/acl/token', { body })).status).toBe(200);
    }
    for (const ns of ['team-a', 'team-b'])
      for (let i = 0; i < 4; i++) await d.api('PUT', `/v1/acl/token?ns=${ns}`, { body: { Description: `${ns} ${i}` } });
    for (let i = 0; i < 7; i++) await d.api('PUT', '/v1/acl/policy', { body: { Name: `p-${i}`, Rules: '' } });
    for (let i = 0; i < 5; i++) await d.api('PUT', '/v1/acl/role', { body: { Name: `r-${i}`, Policies: [{ Name: 'p-0' }] } });
  });
  afterAll(() => d.close());

  /** Every page of `path` at `perPage`, following the cursors; each page's answer kept. */
  async function pages(path: string, perPage: number): Promise<Array<ApiResponse<Item[]>>> {
    const out: Array<ApiResponse<Item[]>> = [];
    let cursor: string | null = null;
    do {
      const sep = path.includes('?') ? '&' : '?';
      const res = (await d.api('GET', `${path}${sep}per_page=${perPage}${cursor ? `&cursor=${cursor}` : ''}`)) as ApiResponse<Item[]>;
      expect(res.status, res.text).toBe(200);
      out.push(res);
      cursor = res.headers.get('x-service-next-cursor');
      expect(out.length).toBeLessThan(100);
    } while (cursor !== null);
    return out;
  }

  for (const [path, perPage] of [
    ['/v1/acl/tokens', 10],
    ['/v1/acl/tokens', 1],
    ['/v1/acl/tokens?servicename=web', 3],
    ['/v1/acl/tokens?ns=*', 4],
    ['/v1/acl/tokens?ns=team-a', 3],
    ['/v1/acl/policies', 3],
    ['/v1/acl/roles', 2],
    ['/v1/acl/roles?policy=POLICY', 2],
  ] as const) {
    it(`${path} in pages of ${perPage} is the whole list, in its order`, async () => {
      const p0 = (await d.api('GET', '/v1/acl/policy/name/p-0')).body as { ID: string };
      const url = path.replace('POLICY', p0.ID);
      const whole = (await d.api('GET', url)).body as Item[];
      expect(whole.length).toBeGreaterThan(perPage);
      const paged = await pages(url, perPage);
      for (const [i, page] of paged.entries()) {
        // Full pages until the last; the last one has no cursor, and is not empty unless the list is.
        if (i < paged.length - 1) expect(page.body.length).toBe(perPage);
        else expect(page.body.length).toBeGreaterThan(0);
      }
      expect(paged.flatMap((p) => p.body).map(idOf)).toEqual(whole.map(idOf));
      // Paged items are the unpaged ones, field for field.
      expect(paged.flatMap((p) => p.body)).toEqual(whole);
    });
  }

  it('writes between pages: what was there throughout comes once, in order; what went is not given', async () => {
    const listed = (await d.api('GET', '/v1/acl/tokens')).body as Array<Item & { Description: string }>;
    const before = listed.map(idOf) as string[];
    const first = (await d.api('GET', '/v1/acl/tokens?per_page=10')) as ApiResponse<Item[]>;
    const cursor = first.headers.get('x-service-next-cursor') as string;
    // One token of the pages to come goes; new ones are made (wherever their IDs fall).
    // One this test made (not the caller's own token, nor the anonymous one).
    const gone = idOf(listed.slice(15).find((t) => /^(t|web) \d+$/.test(t.Description)) as Item) as string;
    expect((await d.api('DELETE', `/v1/acl/token/${gone}`)).status).toBe(200);
    const made: string[] = [];
    for (let i = 0; i < 3; i++)
      made.push(((await d.api('PUT', '/v1/acl/token', { body: { Description: `late ${i}` } })).body as Item).AccessorID as string);
    const rest: Item[] = [];
    let next: string | null = cursor;
    while (next !== null) {
      const res = (await d.api('GET', `/v1/acl/tokens?per_page=10&cursor=${next}`)) as ApiResponse<Item[]>;
      rest.push(...res.body);
      next = res.headers.get('x-service-next-cursor');
    }
    const seen = [...first.body, ...rest].map(idOf) as string[];
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).not.toContain(gone);
    for (const id of before) if (id !== gone) expect(seen).toContain(id);
    expect([...seen].sort()).toEqual(seen);
    // A new token after the cursor is given; one before it is not (its page was already read).
    const last = first.body[first.body.length - 1]?.AccessorID as string;
    for (const id of made) expect(seen.includes(id)).toBe(id > last);
  });

  it('refuses a bad page size or cursor with 400 naming it', async () => {
    for (const perPage of ['0', '10001', 'x', '1.5', '-1', '']) {
      const res = await d.api('GET', `/v1/acl/tokens?per_page=${perPage}`);
      expect(res.status, perPage).toBe(400);
      expect((res.body as { message: string }).message).toContain('Invalid per_page');
    }
    const policiesCursor = (await d.api('GET', '/v1/acl/policies?per_page=1')).headers.get('x-service-next-cursor');
    for (const [path, words] of [
      ['/v1/acl/tokens?per_page=5&cursor=not-a-cursor', 'Invalid cursor'],
      [`/v1/acl/tokens?per_page=5&cursor=${policiesCursor}`, 'not one the tokens list gave'],
      ['/v1/acl/tokens?cursor=abc', 'with per_page'],
      ['/v1/acl/roles?per_page=100000', 'Invalid per_page'],
    ] as const) {
      const res = await d.api('GET', path);
      expect(res.status, path).toBe(400);
      expect((res.body as { message: string }).message).toContain(words);
    }
  });

  it('the client pages a list and iterates over all of it', async () => {
    const client = new WatchwordClient({ address: d.url, token: MANAGEMENT_SECRET });
    const whole = (await client.tokens.list({ servicename: 'web' })).value.map((t) => t.AccessorID);
    const first = await client.tokens.list({ servicename: 'web' }, { perPage: 2 });
    expect(first.value.map((t) => t.AccessorID)).toEqual(whole.slice(0, 2));
    expect(first.nextCursor).toBeDefined();
    const second = await client.tokens.list({ servicename: 'web' }, { perPage: 2, cursor: first.nextCursor as string });
    expect(second.value.map((t) => t.AccessorID)).toEqual(whole.slice(2, 4));
    const all: string[] = [];
    for await (const t of client.tokens.iterate({ servicename: 'web' }, { perPage: 3 })) all.push(t.AccessorID);
    expect(all).toEqual(whole);
    const policies: string[] = [];
    for await (const p of client.policies.iterate({ perPage: 2 })) policies.push(p.ID);
    expect(policies).toEqual((await client.policies.list()).value.map((p) => p.ID));
    const roles: string[] = [];
    for await (const r of client.roles.iterate({}, { perPage: 4 })) roles.push(r.ID);
    expect(roles).toEqual((await client.roles.list()).value.map((r) => r.ID));
  });

  it('a whole list says nothing of cursors; a last page neither', async () => {
    expect((await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-next-cursor')).toBeNull();
    expect((await d.api('GET', '/v1/acl/policies?per_page=10000')).headers.get('x-service-next-cursor')).toBeNull();
  });
});

describe('a whole token list of many tokens', () => {
  let d: TestDaemon;
  let dataDir: string;
  const SEEDED = 10_300;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'paged-many-'));
    await seedTo(join(dataDir, 'store'), 0, SEEDED);
    d = await startTestDaemon({ config: { data_dir: dataDir } });
  }, 120_000);
  afterAll(async () => {
    await d.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('is sent as it is made (chunked, no length), the same list in the same order as its pages, by either door', async () => {
    const pagesOf = async (): Promise<string[]> => {
      const ids: string[] = [];
      let cursor: string | null = null;
      do {
        const res = (await d.api('GET', `/v1/acl/tokens?per_page=4000${cursor ? `&cursor=${cursor}` : ''}`)) as ApiResponse<Item[]>;
        ids.push(...res.body.map((t) => t.AccessorID as string));
        cursor = res.headers.get('x-service-next-cursor');
      } while (cursor !== null);
      return ids;
    };
    const paged = await pagesOf();
    expect(paged.length).toBe(SEEDED + 2);
    // A plain read (the fast path), and a blocking one (Fastify's route through the read gate).
    for (const path of ['/v1/acl/tokens', '/v1/acl/tokens?index=1']) {
      const res = await fetch(`${d.url}${path}`, { headers: { 'X-Consul-Token': MANAGEMENT_SECRET } });
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-length'), path).toBeNull();
      expect(res.headers.get('transfer-encoding'), path).toBe('chunked');
      expect(Number(res.headers.get('x-consul-index')), path).toBeGreaterThan(0);
      const list = (await res.json()) as Item[];
      expect(list.map((t) => t.AccessorID)).toEqual(paged);
    }
    // Filtered and pretty-printed lists come whole, as before.
    const pretty = await fetch(`${d.url}/v1/acl/tokens?pretty`, { headers: { 'X-Consul-Token': MANAGEMENT_SECRET } });
    expect(((await pretty.json()) as Item[]).length).toBe(SEEDED + 2);
  }, 60_000);
});
