import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { IdTable } from '../../../src/store/compact/id-table.js';
import { uuidWords, uuidWordsAt } from '../../../src/store/compact/uuid-words.js';

/** A deterministic generator, so a failing sequence can be replayed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 2 ** 32;
  };
}

describe('IdTable', () => {
  it('reads a canonical lower-case UUID as its four words, and nothing else', () => {
    const w = new Uint32Array(4);
    expect(uuidWords('01234567-89ab-cdef-0123-456789abcdef', w)).toBe(true);
    expect([...w]).toEqual([0x01234567, 0x89abcdef, 0x01234567, 0x89abcdef]);
    for (const bad of [
      '01234567-89AB-cdef-0123-456789abcdef',
      '0123456789ab-cdef-0123-456789abcdef-',
      'anonymous',
      '',
      '01234567-89ab-cdef-0123-456789abcdeg',
      // Char codes past 0xff whose low byte, beside a digit, would read as a pair of hex digits.
      '01234567-89ab-cdef-0123-456789abcd\u0161f',
      '\u3130234567-89ab-cdef-0123-456789abcdef',
    ])
      expect(uuidWords(bad, w), bad).toBe(false);
  });

  it('reads the same words from the bytes of a UUID at an offset, and nothing else', () => {
    const w = new Uint32Array(4);
    const at = (text: string) => uuidWordsAt(Buffer.from(`xy${text}z`, 'latin1'), 2, w);
    expect(at('fedcba98-7654-3210-fedc-ba9876543210')).toBe(true);
    expect([...w]).toEqual([0xfedcba98, 0x76543210, 0xfedcba98, 0x76543210]);
    for (const bad of [
      'fedcba98-7654-3210-fedc-ba987654321G',
      'fedcba98-7654-3210-fedc-ba9876543210'.replace('-', '0'),
      'fedcba98-7654-3210-fedc-ba987654321\xe9',
    ])
      expect(at(bad), bad).toBe(false);
    // Fewer than 36 bytes left.
    expect(uuidWordsAt(Buffer.from('fedcba98-7654-3210-fedc-ba987654321'), 0, w)).toBe(false);
  });

  it('answers as a Map of one key per slot does through random sets, replacements, deletes and conditional deletes, across growth', () => {
    for (const seed of [1, 2, 3]) {
      const random = rng(seed);
      const table = new IdTable();
      // The model: key to slot, and slot to key (a key set to a slot takes it from the key it had).
      const model = new Map<string, number>();
      const keyOf = new Map<number, string>();
      const set = (id: string, slot: number) => {
        const had = keyOf.get(slot);
        if (had !== undefined && had !== id) model.delete(had);
        const was = model.get(id);
        if (was !== undefined) keyOf.delete(was);
        model.set(id, slot);
        keyOf.set(slot, id);
      };
      const keys: string[] = [];
      for (let op = 0; op < 40_000; op++) {
        const r = random();
        // Slots as an arena gives them: dense, mostly new, some taken again.
        const slot = random() < 0.8 ? op : Math.floor(random() * (op + 1));
        if (r < 0.55 || keys.length === 0) {
          // New keys: mostly UUIDs, some upper-case ones and free-form secrets (kept exactly as given).
          const kind = random();
          const id = kind < 0.9 ? randomUUID() : kind < 0.95 ? randomUUID().toUpperCase() : `secret-${op}`;
          keys.push(id);
          table.set(id, slot);
          set(id, slot);
        } else if (r < 0.7) {
          const id = keys[Math.floor(random() * keys.length)] as string;
          table.set(id, slot);
          set(id, slot);
        } else if (r < 0.85) {
          const id = keys[Math.floor(random() * keys.length)] as string;
          const was = model.get(id);
          if (was !== undefined) keyOf.delete(was);
          expect(table.delete(id)).toBe(model.delete(id));
        } else {
          // A slot's key removed by the slot: a slot holding one (a key's), or one that may hold none.
          const was = model.get(keys[Math.floor(random() * keys.length)] as string);
          const named = random() < 0.7 && was !== undefined ? was : slot;
          const key = keyOf.get(named);
          if (key !== undefined) {
            keyOf.delete(named);
            model.delete(key);
          }
          expect(table.deleteSlot(named)).toBe(key !== undefined);
        }
        // Every invariant after each step while the table is small and grows, then now and then.
        if (op < 3000 || op % 997 === 0) table.verify();
        if (op % 4999 === 0) {
          expect(keys.filter((k) => table.get(k) !== model.get(k))).toEqual([]);
          expect(table.size).toBe(model.size);
        }
      }
      expect(keys.filter((k) => table.get(k) !== model.get(k))).toEqual([]);
      expect(table.size).toBe(model.size);
      expect([...table.values()].sort((a, b) => a - b)).toEqual([...model.values()].sort((a, b) => a - b));
    }
  });

  it('gives a slot one key: setting another takes it from the old, which no longer answers', () => {
    const table = new IdTable();
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    table.set(a, 5);
    table.set(b, 5);
    expect([table.get(a), table.get(b), table.size]).toEqual([undefined, 5, 1]);
    // A key moved to another slot; the slot it left then takes a new key without disturbing it.
    table.set(b, 6);
    table.set(c, 5);
    expect([table.get(b), table.get(c), table.size]).toEqual([6, 5, 2]);
    table.set('anonymous', 6);
    expect([table.get(b), table.get('anonymous'), table.size]).toEqual([undefined, 6, 2]);
    table.set(a, 6);
    expect([table.get('anonymous'), table.get(a), table.size]).toEqual([undefined, 6, 2]);
  });

  it('keeps probe runs whole when a delete wraps around the end of the table', () => {
    // Small tables filled near their load limit (runs then cross the end), emptied one key at a time in random
    // order: after each delete every remaining key must still be found.
    const random = rng(7);
    for (let trial = 0; trial < 20; trial++) {
      const table = new IdTable();
      const ids = Array.from({ length: 716 }, () => randomUUID());
      ids.forEach((id, i) => table.set(id, i));
      const order = ids.map((_, i) => i).sort(() => random() - 0.5);
      const lost: string[] = [];
      order.forEach((i, n) => {
        if (!table.delete(ids[i] as string)) lost.push(`delete ${i}`);
        for (let m = n + 1; m < order.length; m++) {
          const j = order[m] as number;
          if (table.get(ids[j] as string) !== j) lost.push(`${j} after deleting ${i}`);
        }
      });
      expect(lost.slice(0, 5)).toEqual([]);
      expect(table.size).toBe(0);
    }
  });

  it("keeps probe runs short when keys arrive in another table's order", () => {
    // A snapshot sends tokens in the order its table holds them. Inserted in that order into a table hashing alike
    // and half its size, the second half of that order sweeps the table again over the first half's keys, and one
    // run grows ahead of the sweep until the table doubles (at 91,750 keys here); each insert walks it to its end.
    const first = new IdTable();
    const ids = Array.from({ length: 140_000 }, () => randomUUID());
    ids.forEach((id, slot) => first.set(id, slot));
    const second = new IdTable();
    [...first.values()].slice(0, 90_000).forEach((slot, i) => second.set(ids[slot] as string, i));
    expect(second.size).toBe(90_000);
    expect(first.longestRun()).toBeLessThan(300);
    expect(second.longestRun()).toBeLessThan(300);
  });

  it('takes room for the keys a load expects while empty, answering as before, and never once it holds keys', () => {
    const ids = Array.from({ length: 20_000 }, () => randomUUID());
    const table = new IdTable();
    table.reserve(20_000);
    const reserved = table.bytes;
    ids.forEach((id, slot) => table.set(id, slot));
    // No doubling on the way: the room taken was enough.
    expect(table.bytes).toBe(reserved);
    expect(ids.every((id, slot) => table.get(id) === slot)).toBe(true);
    expect(table.size).toBe(20_000);
    // Holding keys, a reservation changes nothing (the keys stay where they are).
    table.reserve(1_000_000);
    expect(table.bytes).toBe(reserved);
    expect(ids.every((id, slot) => table.get(id) === slot)).toBe(true);
    // Without one, the table grew its way there to the same size.
    const grown = new IdTable();
    ids.forEach((id, slot) => grown.set(id, slot));
    expect(grown.bytes).toBe(reserved);
  });

  it('filled from empty without a read between, answers as one read after every set: duplicates end at the later slot', () => {
    for (const seed of [11, 12]) {
      const random = rng(seed);
      const filled = new IdTable();
      const checked = new IdTable();
      const ids: string[] = [];
      const msgpack = (id: string) => Buffer.concat([Buffer.from([0xd9, id.length]), Buffer.from(id)]);
      for (let slot = 0; slot < 30_000; slot++) {
        const r = random();
        // Mostly new UUIDs; some noted again for a later slot (a corrupt store's duplicate), some kept as strings.
        const id = r < 0.9 || ids.length === 0 ? randomUUID() : r < 0.95 ? (ids[Math.floor(random() * ids.length)] as string) : `s-${slot}`;
        ids.push(id);
        if (random() < 0.5) filled.set(id, slot);
        else expect(filled.setAt(msgpack(id), 0, slot)).toBe(true);
        checked.set(id, slot);
        checked.get(id);
      }
      filled.settle();
      filled.verify();
      expect(ids.filter((id) => filled.get(id) !== checked.get(id))).toEqual([]);
      expect(filled.size).toBe(checked.size);
      expect(filled.longestRun()).toBeLessThan(300);
      // Settled, it takes sets, replacements and deletes as any table does.
      const a = randomUUID();
      filled.set(a, 0);
      checked.set(a, 0);
      filled.delete(ids[1] as string);
      checked.delete(ids[1] as string);
      filled.verify();
      expect(ids.filter((id) => filled.get(id) !== checked.get(id))).toEqual([]);
      expect(filled.get(a)).toBe(0);
    }
  });

  it('settles when a slot already given words is set again while it fills, and at its first read', () => {
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    const refilled = new IdTable();
    refilled.reserve(4);
    refilled.set(a, 0);
    refilled.set(b, 1);
    // Slot 1 given another key before any read: b is no longer held, a moves from slot 0.
    refilled.set(a, 1);
    expect([refilled.get(a), refilled.get(b), refilled.size]).toEqual([1, undefined, 1]);
    refilled.verify();

    const read = new IdTable();
    read.set(a, 0);
    read.set(b, 1);
    expect(read.get(a)).toBe(0);
    // Placed one by one after the read.
    read.set(c, 2);
    expect([read.get(a), read.get(b), read.get(c), read.size]).toEqual([0, 1, 2, 3]);
    read.verify();
  });

  it('refuses a slot it cannot hold', () => {
    const table = new IdTable();
    expect(() => table.set(randomUUID(), 2 ** 32 - 1)).toThrow(RangeError);
    expect(() => table.set(randomUUID(), -1)).toThrow(RangeError);
  });
});
