import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TokenRecord } from '../../../src/domain/types.js';
import { CompactTable } from '../../../src/store/compact/compact-table.js';
import { IdOrder, uuidText } from '../../../src/store/compact/id-order.js';
import { IdTable } from '../../../src/store/compact/id-table.js';
import { uuidWords } from '../../../src/store/compact/uuid-words.js';
import { MemTable, tokenCodec } from '../../../src/store/memory.js';
import { tokensTable } from '../../../src/store/schema.js';
import type { Table } from '../../../src/store/table.js';
import { tokenRecord } from '../../helpers/records.js';
import { seeded } from '../../helpers/random.js';

// The ID order against the plainest model of it: the keys held, sorted as strings sort.

/** Keys of every kind the order meets: random UUIDs, UUIDs sharing their first word, and keys kept as strings. */
function keyMaker(rnd: () => number): () => string {
  const shared = ['00000000', '7fffffff', 'ffffffff'];
  return () => {
    const r = rnd();
    if (r < 0.05) return ['anonymous', 'zeta', 'chosen-', '0', 'ffffffff-zz'][Math.floor(rnd() * 5)] + String(Math.floor(rnd() * 1e6));
    if (r < 0.08) return randomUUID().toUpperCase();
    if (r < 0.2) return `${shared[Math.floor(rnd() * shared.length)]}${randomUUID().slice(8)}`;
    // Three words shared: only the last tells them apart.
    if (r < 0.3) return `${shared[Math.floor(rnd() * shared.length)]}-0000-4000-8000-0000${randomUUID().slice(28)}`;
    return randomUUID();
  };
}

/** Every key of `order` walked from `after` in batches of `batch`, each batch sought again by the key it ended at. */
function walk(order: IdOrder, after: string | undefined, batch: number): string[] {
  const out: string[] = [];
  const slots: number[] = [];
  for (let last = after; ; ) {
    order.slotsAfter(last, batch, slots);
    if (slots.length === 0) return out;
    for (const s of slots) out.push(order.keyOf(s));
    last = out[out.length - 1];
  }
}

describe('IdOrder', () => {
  it('formats the words of a UUID back to its text', () => {
    const w = new Uint32Array(4);
    for (let i = 0; i < 100; i++) {
      const id = randomUUID();
      expect(uuidWords(id, w)).toBe(true);
      expect(uuidText(w[0] as number, w[1] as number, w[2] as number, w[3] as number)).toBe(id);
    }
  });

  for (const seed of [1, 2, 3]) {
    it(`holds the keys in the order strings sort, through adds and deletes that split and join chunks (seed ${seed})`, () => {
      const rnd = seeded(seed);
      const makeKey = keyMaker(rnd);
      const ids = new IdTable();
      const slotOf = new Map<string, number>();
      let next = 0;
      const add = (key: string) => {
        if (slotOf.has(key)) return undefined;
        const slot = next++;
        ids.set(key, slot);
        slotOf.set(key, slot);
        return slot;
      };
      // Made whole from 3,000 keys, then changed.
      for (let i = 0; i < 3000; i++) add(makeKey());
      const order = IdOrder.of(ids, Uint32Array.from([...slotOf.values()].sort((a, b) => a - b)));
      const model = () => [...slotOf.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      expect(walk(order, undefined, 97)).toEqual(model());
      for (let round = 0; round < 12; round++) {
        // Grow past several splits, then empty most of it (joins, emptied chunks).
        const adds = round % 3 === 2 ? 200 : 2500;
        for (let i = 0; i < adds; i++) {
          const slot = add(makeKey());
          if (slot !== undefined) order.add(slot);
        }
        const keys = [...slotOf.keys()];
        const deletes = round % 3 === 2 ? Math.floor(keys.length * 0.9) : 1500;
        for (let i = 0; i < deletes && slotOf.size > 0; i++) {
          const key = keys[Math.floor(rnd() * keys.length)] as string;
          const slot = slotOf.get(key);
          if (slot === undefined) continue;
          expect(order.delete(slot)).toBe(true);
          expect(order.delete(slot)).toBe(false);
          ids.delete(key);
          slotOf.delete(key);
        }
        const live = new Set(slotOf.values());
        order.verify('tokens', slotOf.size, (s) => live.has(s));
        const sorted = model();
        expect(walk(order, undefined, 1 + Math.floor(rnd() * 300))).toEqual(sorted);
        // From cursors that are held keys, keys between them, and keys of another kind.
        for (let i = 0; i < 5; i++) {
          const cursor = rnd() < 0.5 && sorted.length > 0 ? (sorted[Math.floor(rnd() * sorted.length)] as string) : makeKey();
          expect(walk(order, cursor, 64)).toEqual(sorted.filter((k) => k > cursor));
        }
      }
    });
  }
});

type Tokens = Table<TokenRecord, string>;

describe('a compact table walked in ID order', () => {
  it('pages a key of many members from the ID order, and a walk stays in order while tokens come and go between its batches', () => {
    const rnd = seeded(7);
    const table = new CompactTable<TokenRecord, string>(tokensTable, tokenCodec(64));
    const compact = table as Tokens;
    const plain = new MemTable<TokenRecord, string>(tokensTable) as Tokens;
    const make = (ns: string) =>
      tokenRecord({ AccessorID: randomUUID(), SecretID: randomUUID(), Namespace: ns, Policies: rnd() < 0.3 ? [{ ID: 'p1' }] : [] });
    for (let i = 0; i < 24_000; i++) {
      const t = make(rnd() < 0.9 ? 'default' : 'team-a');
      compact.put(t);
      plain.put(t);
    }
    const scope = 'default\u0000default';
    const ids = (it: Iterable<TokenRecord>) => Array.from(it, (t) => t.AccessorID);
    // A key above the sorting threshold (a namespace's 21,600), one below it (a policy's 7,000), both from cursors.
    for (const [index, key] of [
      ['scope', scope],
      ['policy', 'p1'],
    ] as const) {
      const all = ids(plain.sortedMembers(index, key));
      expect(ids(compact.sortedMembers(index, key))).toEqual(all);
      for (const cursor of [all[0], all[5000], all[all.length - 2], randomUUID()] as string[])
        expect(ids(compact.sortedMembersAfter(index, key, cursor))).toEqual(all.filter((id) => id > cursor));
    }
    // A walk of the namespace that meets creates and deletes between the tokens it gives.
    const before = ids(plain.sortedMembers('scope', scope));
    const deleted = new Set<string>();
    const seen: string[] = [];
    for (const t of compact.sortedMembersAfter('scope', scope, undefined)) {
      seen.push(t.AccessorID);
      if (seen.length % 50 === 0) {
        const added = make('default');
        compact.put(added);
        plain.put(added);
        const victim = before[Math.floor(rnd() * before.length)] as string;
        if (!deleted.has(victim)) {
          // The reaper's deletes read the index keys from the bytes; others have the record.
          if (deleted.size % 2 === 0) compact.delete(victim);
          else compact.deleteUnread(victim);
          plain.delete(victim);
          deleted.add(victim);
        }
      }
    }
    expect([...seen].sort()).toEqual(seen);
    expect(new Set(seen).size).toBe(seen.length);
    // Every token there from start to end was given.
    const given = new Set(seen);
    expect(before.filter((id) => !deleted.has(id) && !given.has(id))).toEqual([]);
    table.verify();
    expect(ids(compact.sortedMembers('scope', scope))).toEqual(ids(plain.sortedMembers('scope', scope)));
  });
});
