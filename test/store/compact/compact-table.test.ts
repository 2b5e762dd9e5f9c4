import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CompactTable } from '../../../src/store/compact/compact-table.js';
import { decodeRaw, encode } from '../../../src/store/records.js';

interface Tok {
  AccessorID: string;
  SecretID: string;
  Description: string;
  ModifyIndex: number;
}

const table = (cacheSize = 16) =>
  new CompactTable<Tok>({
    id: { of: (t) => t.AccessorID, field: 'AccessorID' },
    unique: [{ name: 'secret', of: (t) => t.SecretID, field: 'SecretID' }],
    encode,
    decode: (b) => decodeRaw(b) as Tok,
    cacheSize,
  });

const token = (n: number, secret: string = randomUUID()): Tok => ({
  AccessorID: randomUUID(),
  SecretID: secret,
  Description: `token ${n}`,
  ModifyIndex: n,
});

describe('CompactTable', () => {
  it('answers as maps of objects do through puts, replacements with new secrets, deletes and loads', () => {
    const t = table();
    const byID = new Map<string, Tok>();
    const bySecret = new Map<string, string>();
    const ids: string[] = [];
    // Secrets of versions replaced or deleted: they must find nothing.
    const dead = new Set<string>();
    for (let op = 0; op < 6000; op++) {
      const r = (op * 7919) % 100;
      if (r < 45 || ids.length === 0) {
        const tok = token(op, op % 10 === 0 ? `chosen-secret-${op}` : randomUUID());
        if (op % 2 === 0) t.put(tok);
        else expect(t.load(encode(tok))).toBe(true);
        byID.set(tok.AccessorID, tok);
        bySecret.set(tok.SecretID, tok.AccessorID);
        ids.push(tok.AccessorID);
      } else if (r < 75) {
        const id = ids[op % ids.length] as string;
        const old = byID.get(id);
        const tok = { ...token(op), AccessorID: id };
        const replaced = t.put(tok);
        expect(replaced).toEqual(old);
        if (old) {
          bySecret.delete(old.SecretID);
          dead.add(old.SecretID);
        }
        byID.set(id, tok);
        bySecret.set(tok.SecretID, id);
      } else {
        const id = ids[op % ids.length] as string;
        const old = byID.get(id);
        expect(t.delete(id)).toEqual(old);
        if (old) {
          bySecret.delete(old.SecretID);
          dead.add(old.SecretID);
        }
        byID.delete(id);
      }
    }
    expect(t.size).toBe(byID.size);
    expect(ids.filter((id) => JSON.stringify(t.get(id)) !== JSON.stringify(byID.get(id)))).toEqual([]);
    for (const [secret, id] of bySecret) {
      expect(t.byUnique('secret', secret)?.AccessorID).toBe(id);
      expect(t.uniqueID('secret', secret)).toBe(id);
    }
    expect([...dead].filter((secret) => t.byUnique('secret', secret) !== undefined)).toEqual([]);
    expect([...t.values()].map((x) => x.AccessorID).sort()).toEqual([...byID.keys()].sort());
  });

  it('keeps the most recently used records decoded: the same object while cached, an equal one after', () => {
    const t = table(2);
    const [a, b, c] = [token(1), token(2), token(3)];
    for (const x of [a, b, c]) t.put(x);
    // c and b are cached; a was dropped.
    expect(t.get(c.AccessorID)).toBe(c);
    expect(t.get(b.AccessorID)).toBe(b);
    const again = t.get(a.AccessorID);
    expect(again).not.toBe(a);
    expect(again).toEqual(a);
    // Reading a made it most recent; c, the least recent, was dropped.
    expect(t.get(a.AccessorID)).toBe(again);
    expect(t.get(c.AccessorID)).not.toBe(c);
  });

  it('refuses to load bytes without an ID', () => {
    const t = table();
    expect(t.load(encode({ SecretID: randomUUID() }))).toBe(false);
    expect(t.load(encode(['not', 'a', 'map']))).toBe(false);
    expect(t.size).toBe(0);
  });
});
