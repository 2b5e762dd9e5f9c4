import { Level } from 'level';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TokenRecord } from '../../src/domain/types.js';
import { LevelStore } from '../../src/store/level-store.js';
import { encode } from '../../src/store/records.js';
import { TABLES, key } from '../../src/store/schema.js';
import { tokenRecord } from '../helpers/records.js';
import { tempDir } from '../helpers/temp-dir.js';

const open = (path: string, scanAside: boolean) =>
  LevelStore.open(path, { durability: 'fsync', changeLog: true, checkpoint: false, scanAside });
const everywhere = { partition: 'default', namespaces: ['default'] };

/** Everything a reader answers of the tokens: each by ID and by secret, the filters, the expiry order. */
function view(store: LevelStore, tokens: TokenRecord[]) {
  const r = store.reader;
  return {
    byID: tokens.map((t) => r.getToken(t.AccessorID) ?? null),
    bySecret: tokens.map((t) => r.getTokenBySecret(t.SecretID)?.AccessorID ?? null),
    all: r.listTokens(everywhere).map((t) => t.AccessorID),
    policy: r.listTokens({ ...everywhere, policy: 'p1' }).map((t) => t.AccessorID),
    role: r.listTokens({ ...everywhere, role: 'r1' }).map((t) => t.AccessorID),
    service: r.listTokens({ ...everywhere, serviceName: 'web' }).map((t) => t.AccessorID),
    local: r.listTokens({ ...everywhere, localOnly: true }).map((t) => t.AccessorID),
    expiring: r.expiredTokens(Date.parse('2100-01-01T00:00:00Z'), 1000).map((e) => e.id),
  };
}

describe('tokens read on a second thread at open', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let tokens: TokenRecord[];

  beforeEach(async () => {
    dir = await tempDir();
    const store = await open(dir.path, false);
    // Every kind of field the indexes read; long descriptions make ~25 MB, several of the
    // worker's 4 MB chunks (more than it sends ahead), and one record larger than a chunk.
    tokens = Array.from({ length: 400 }, (_, i) =>
      tokenRecord({
        Description: i === 7 ? 'y'.repeat(5 * 1024 * 1024) : i % 5 === 0 ? `${i}`.repeat(100_000) : `token ${i}`,
        Policies: i % 3 === 0 ? [{ ID: 'p1' }] : [],
        Roles: i % 4 === 1 ? [{ ID: 'r1' }] : [],
        ServiceIdentities: i % 5 === 0 ? [{ ServiceName: 'web' }] : [],
        Local: i % 7 === 0,
        ...(i % 4 === 0 ? { ExpirationTime: new Date(Date.parse('2099-01-01T00:00:00Z') + i * 1000).toISOString() } : {}),
        ...(i === 0 ? { SecretID: 'an-operator-chosen-secret' } : {}),
      }),
    );
    for (let i = 0; i < tokens.length; i += 50) await store.transact((tx) => tokens.slice(i, i + 50).forEach((t) => tx.put('tokens', t)));
    await store.close();
  });

  afterEach(() => dir.remove());

  it('holds what a scan on this thread holds, takes writes, and leaves LevelDB open to this thread', async () => {
    const here = await open(dir.path, false);
    expect(here.tokensFrom).toBeUndefined();
    const expected = view(here, tokens);
    await here.close();
    expect(expected.byID.every((t) => t !== null)).toBe(true);
    expect(expected.role.length).toBe(100);

    const aside = await open(dir.path, true);
    expect(aside.tokensFrom).toBe('a scan on a second thread');
    expect(view(aside, tokens)).toEqual(expected);
    const t = tokens[3] as TokenRecord;
    await aside.transact((tx) => tx.put('tokens', { ...t, Description: 'changed' }));
    await aside.transact((tx) => tx.del('tokens', (tokens[4] as TokenRecord).AccessorID));
    await aside.close();

    const after = await open(dir.path, true);
    expect(after.reader.getToken(t.AccessorID)?.Description).toBe('changed');
    expect(after.reader.getToken((tokens[4] as TokenRecord).AccessorID)).toBeUndefined();
    expect(after.reader.getTokenBySecret('an-operator-chosen-secret')?.AccessorID).toBe((tokens[0] as TokenRecord).AccessorID);
    await after.close();
  });

  it.each([
    ['not a map', encode('not a token')],
    ['a map whose ID is not a string', encode({ ...tokenRecord({}), AccessorID: 5 })],
  ])('refuses a store with a stored token that is %s, as a scan on this thread does', async (_, bytes) => {
    const db = new Level<string, Uint8Array>(dir.path, { keyEncoding: 'utf8', valueEncoding: 'view' });
    await db.put(key(TABLES.tokens.prefix, '00000000-0000-4000-8000-00000000bad0'), bytes);
    await db.close();
    const here = await open(dir.path, false).then(
      () => 'opened',
      (err: Error) => err.message,
    );
    expect(here).toMatch(/corrupt/);
    const aside = await open(dir.path, true).then(
      () => 'opened',
      (err: Error) => err.message,
    );
    expect(aside).toBe(here);
  });
});
