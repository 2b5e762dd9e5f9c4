import { describe, expect, it } from 'vitest';
import type { TokenRecord } from '../../../src/domain/types.js';
import { CompactTable } from '../../../src/store/compact/compact-table.js';
import { MemTable, tokenCodec } from '../../../src/store/memory.js';
import { encode } from '../../../src/store/records.js';
import { tokensTable } from '../../../src/store/schema.js';
import { tokenRecord, variedToken } from '../../helpers/records.js';
import { seeded } from '../../helpers/random.js';

const TOKENS = 70_000;

describe('an unread delete', () => {
  it('leaves every index as the object table does, past the numbering limit and its restart, its time named or not', () => {
    const rnd = seeded(23);
    const objects = new MemTable<TokenRecord, string>(tokensTable);
    const compact = new CompactTable<TokenRecord, string>(tokensTable, tokenCodec(64));
    const tokens: TokenRecord[] = [];
    for (let i = 0; i < TOKENS; i++) {
      const token = variedToken(i, rnd);
      if (!compact.loadStored(encode(token))) throw new Error(`token ${i} refused`);
      tokens.push(token);
    }
    compact.finishLoading();
    // A few read first: those are deleted from their decoded form.
    for (let i = 0; i < 100; i++) compact.get(tokens[i * 7]?.AccessorID as string);
    const order = tokens.map((t) => ({ t, at: rnd() })).sort((a, b) => a.at - b.at);
    const deleted = order.slice(0, TOKENS - 2000).map((e) => e.t);
    const kept = order.slice(TOKENS - 2000).map((e) => e.t);
    const wrong: string[] = [];
    for (const [n, old] of deleted.entries()) {
      const answer = n % 2 === 0 ? ['SecretID', 'CreateTime'] : [];
      // The reaper names the time the order holds a token at (a third of them here); a time it is not held at is read again.
      const expiry = old.ExpirationTime === undefined ? undefined : Date.parse(old.ExpirationTime);
      const time = expiry === undefined || n % 3 === 2 ? undefined : n % 3 === 0 ? expiry : expiry + 1;
      const fields = compact.deleteUnread(old.AccessorID, answer, time);
      if (time !== expiry && fields?.ExpirationTime !== old.ExpirationTime)
        wrong.push(`${old.AccessorID}: expiry ${fields?.ExpirationTime}`);
      if (answer.length > 0 && (fields?.SecretID !== old.SecretID || fields.CreateTime !== old.CreateTime))
        wrong.push(`${old.AccessorID}: ${JSON.stringify(fields)}`);
    }
    expect(wrong).toEqual([]);
    // The object table of the tokens left: what every index must hold now.
    for (const t of kept) objects.loadStored(encode(t));
    objects.finishLoading();
    expect(compact.deleteUnread(deleted[0]?.AccessorID as string)).toBeUndefined();
    compact.verify();
    expect(compact.size).toBe(objects.size);
    for (const index of ['policy', 'role', 'service', 'scope', 'authMethod', 'local', 'created', 'quota']) {
      const keys = [...objects.indexKeys(index)].sort();
      expect([...compact.indexKeys(index)].sort()).toEqual(keys);
      for (const key of keys) expect([...compact.sortedMembers(index, key)]).toEqual([...objects.sortedMembers(index, key)]);
    }
    for (const t of kept) {
      expect(compact.uniqueID('secret', t.SecretID)).toBe(t.AccessorID);
      if (t.PreviousSecretID !== undefined) expect(compact.uniqueID('previousSecret', t.PreviousSecretID)).toBe(t.AccessorID);
    }
    for (const t of deleted.slice(0, 500)) {
      expect(compact.uniqueID('secret', t.SecretID)).toBeUndefined();
      if (t.PreviousSecretID !== undefined) expect(compact.uniqueID('previousSecret', t.PreviousSecretID)).toBeUndefined();
    }
    expect(compact.orderedUpTo(Number.MAX_SAFE_INTEGER, TOKENS)).toEqual(objects.orderedUpTo(Number.MAX_SAFE_INTEGER, TOKENS));
  });

  it('answers only indexed fields: asked for another, it names it and deletes nothing', () => {
    const compact = new CompactTable<TokenRecord, string>(tokensTable, tokenCodec(64));
    const token = tokenRecord({ AccessorID: '00000000-0000-4000-8000-000000000001' });
    expect(compact.loadStored(encode(token))).toBe(true);
    compact.finishLoading();
    expect(() => compact.deleteUnread(token.AccessorID, ['Description'])).toThrow(/Description/);
    expect(compact.get(token.AccessorID)?.AccessorID).toBe(token.AccessorID);
    compact.verify();
  });
});
