import { existsSync } from 'node:fs';
import { readFile, readdir, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Level } from 'level';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TokenRecord } from '../../src/domain/types.js';
import { LevelStore } from '../../src/store/level-store.js';
import { encode } from '../../src/store/records.js';
import { TABLES, key } from '../../src/store/schema.js';
import { tempDir } from '../helpers/temp-dir.js';
import { everywhere, mixedTokens, tokensView, writeTokens } from '../helpers/tokens-view.js';

const open = (path: string, checkpoint?: boolean) =>
  LevelStore.open(path, { durability: 'fsync', changeLog: true, ...(checkpoint === undefined ? {} : { checkpoint }) });
const CHECKPOINT = 'tokens.checkpoint';

describe('the tokens checkpoint', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let tokens: TokenRecord[];

  beforeEach(async () => {
    dir = await tempDir();
    const store = await open(dir.path);
    tokens = mixedTokens(300);
    await writeTokens(store, tokens);
    // Replaced and deleted tokens leave holes and garbage behind them in memory.
    const changed = { ...(tokens[1] as TokenRecord), Description: 'changed', Policies: [{ ID: 'p1' }] };
    await store.transact((tx) => tx.put('tokens', changed));
    tokens[1] = changed;
    await store.transact((tx) => tx.del('tokens', (tokens[2] as TokenRecord).AccessorID));
    tokens = tokens.filter((_, i) => i !== 2);
    await store.close();
  });

  afterEach(() => dir.remove());

  it('is written at a clean close, read by the next open in place of a scan, and removed once read', async () => {
    expect(existsSync(join(dir.path, CHECKPOINT))).toBe(true);
    const scanned = await open(dir.path, false);
    const expected = tokensView(scanned, tokens);
    await scanned.close();
    // A store opened without checkpoints writes none, and leaves an earlier one in place... of which there is none now:
    // its open scanned, so the next open must scan too (the listing changed).
    const again = await open(dir.path);
    expect(again.tokensFrom).toMatch(/^a scan/);
    await again.close();
    const restarted = await open(dir.path);
    expect(restarted.tokensFrom).toBe('its checkpoint (299 tokens)');
    expect(existsSync(join(dir.path, CHECKPOINT))).toBe(false);
    expect(tokensView(restarted, tokens)).toEqual(expected);
    expect(expected.byID.every((t) => t !== null)).toBe(true);
    expect(expected.policy.length).toBe(tokens.filter((t) => t.Policies.length > 0).length);
    // The restored table takes writes as a scanned one does.
    const t = tokens[3] as TokenRecord;
    await restarted.transact((tx) => tx.put('tokens', { ...t, Policies: [] }));
    await restarted.transact((tx) => tx.del('tokens', (tokens[4] as TokenRecord).AccessorID));
    expect(restarted.reader.listTokens({ ...everywhere, policy: 'p1' }).map((x) => x.AccessorID)).not.toContain(t.AccessorID);
    expect(restarted.reader.getTokenBySecret((tokens[4] as TokenRecord).SecretID)).toBeUndefined();
    await restarted.close();
  });

  it('is set aside when LevelDB was opened since it was written, and the change made then is read', async () => {
    const db = new Level<string, Uint8Array>(join(dir.path), { keyEncoding: 'utf8', valueEncoding: 'view' });
    await db.open();
    const t = tokens[5] as TokenRecord;
    await db.put(key(TABLES.tokens.prefix, t.AccessorID), encode({ ...t, Description: 'changed behind the store' }));
    await db.close();
    const store = await open(dir.path);
    expect(store.tokensFrom).toBe('a scan (checkpoint: the store changed since it was written)');
    expect(store.reader.getToken(t.AccessorID)?.Description).toBe('changed behind the store');
    await store.close();
  });

  it('is set aside when a LevelDB file was written in place since (same size, another time)', async () => {
    const table = (await readdir(dir.path)).find((f) => f.endsWith('.ldb') || f.endsWith('.log')) as string;
    const before = await stat(join(dir.path, table));
    await utimes(join(dir.path, table), before.atime, new Date(before.mtimeMs + 5000));
    const store = await open(dir.path);
    expect(store.tokensFrom).toBe('a scan (checkpoint: the store changed since it was written)');
    expect(store.reader.listTokens(everywhere).length).toBe(tokens.length);
    await store.close();
  });

  it('is set aside when its bytes do not match their digest', async () => {
    const path = join(dir.path, CHECKPOINT);
    const bytes = await readFile(path);
    // A byte of a record's description (token 7's), flipped: still a well-formed record.
    const at = bytes.indexOf(Buffer.from('token 7'));
    expect(at).toBeGreaterThan(0);
    bytes[at + 6] = '8'.charCodeAt(0);
    await writeFile(path, bytes);
    const store = await open(dir.path);
    expect(store.tokensFrom).toBe('a scan: the checkpoint was set aside (its digest does not match)');
    expect(store.reader.listTokens(everywhere).length).toBe(tokens.length);
    const seven = tokens.find((t) => t.Description === 'token 7') as TokenRecord;
    expect(store.reader.getToken(seven.AccessorID)?.Description).toBe('token 7');
    await store.close();
  });

  it('is set aside when cut short, and not written by a store opened without checkpoints', async () => {
    const path = join(dir.path, CHECKPOINT);
    const bytes = await readFile(path);
    await writeFile(path, bytes.subarray(0, bytes.length - 1000));
    const store = await open(dir.path, false);
    expect(store.tokensFrom).toBeUndefined();
    expect(store.reader.listTokens(everywhere).length).toBe(tokens.length);
    await store.close();
    // Its open left the cut file; it no longer matches the store, and nothing new was written.
    expect((await readFile(path)).length).toBe(bytes.length - 1000);
    const next = await open(dir.path);
    expect(next.tokensFrom).toBe('a scan (checkpoint: the store changed since it was written)');
    await next.close();
  });
});
