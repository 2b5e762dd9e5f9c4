import { Level } from 'level';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TokenRecord } from '../../src/domain/types.js';
import type { ScanKeying } from '../../src/store/compact/scan-protocol.js';
import { LevelStore } from '../../src/store/level-store.js';
import { encode } from '../../src/store/records.js';
import { TABLES, key } from '../../src/store/schema.js';
import { tokenRecord } from '../helpers/records.js';
import { tempDir } from '../helpers/temp-dir.js';
import { mixedTokens, tokensView, writeTokens } from '../helpers/tokens-view.js';

const open = (path: string, scanAside: boolean, scanKeying?: ScanKeying) =>
  LevelStore.open(path, { durability: 'fsync', changeLog: true, checkpoint: false, scanAside, ...(scanKeying ? { scanKeying } : {}) });

/** A stored token whose Policies value is the single byte `b`. */
function withPoliciesByte(b: number): Uint8Array {
  const bytes = Buffer.from(encode({ ...tokenRecord({}), Policies: 7 }));
  // 7 is one byte (a positive fixint) right after the key.
  const at = bytes.indexOf(Buffer.from('Policies')) + 'Policies'.length;
  if (bytes[at] !== 7) throw new Error('Policies not where expected');
  bytes[at] = b;
  return bytes;
}

/** A stored token whose SecretID is a string of the bytes `raw` (four of them). */
function withSecretBytes(raw: number[]): Uint8Array {
  const bytes = Buffer.from(encode({ ...tokenRecord({}), SecretID: 'zzzz' }));
  const at = bytes.indexOf(Buffer.from('zzzz'));
  Buffer.from(raw).copy(bytes, at);
  return bytes;
}

describe('tokens read on a second thread at open', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let tokens: TokenRecord[];

  beforeEach(async () => {
    dir = await tempDir();
    const store = await open(dir.path, false);
    // Every kind of field the indexes read; long descriptions make ~25 MB, several of the
    // worker's 4 MB chunks (more than it sends ahead), and one record larger than a chunk.
    tokens = mixedTokens(400, (i) => (i === 7 ? 'y'.repeat(5 * 1024 * 1024) : i % 5 === 0 ? `${i}`.repeat(100_000) : `token ${i}`));
    await writeTokens(store, tokens);
    await store.close();
  });

  afterEach(() => dir.remove());

  it('holds what a scan on this thread holds, takes writes, and leaves LevelDB open to this thread', async () => {
    const here = await open(dir.path, false);
    expect(here.tokensFrom).toBeUndefined();
    const expected = tokensView(here, tokens);
    await here.close();
    expect(expected.byID.every((t) => t !== null)).toBe(true);
    expect(expected.role.length).toBe(100);

    // Keyed on that thread or on this one, chunk by chunk as the two keep up, or all one way.
    for (const keying of ['always', 'never'] as const) {
      const one = await open(dir.path, true, keying);
      expect(one.tokensFrom).toBe('a scan on a second thread');
      expect(tokensView(one, tokens)).toEqual(expected);
      (one.tables.tokens as unknown as { verify(): void }).verify();
      await one.close();
    }
    const aside = await open(dir.path, true);
    expect(aside.tokensFrom).toBe('a scan on a second thread');
    expect(tokensView(aside, tokens)).toEqual(expected);
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
    ['a map with a byte no msgpack value starts with where its policies are', withPoliciesByte(0xc1)],
    ['a map whose secret is not UTF-8', withSecretBytes([0xff, 0xfe, 0xfd, 0xfc])],
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
