import { describe, expect, it } from 'vitest';
import type { TokenRecord } from '../../../src/domain/types.js';
import { CompactTable } from '../../../src/store/compact/compact-table.js';
import { KeyMemo, ValueNumbers } from '../../../src/store/compact/key-memo.js';
import { MemTable, tokenCodec } from '../../../src/store/memory.js';
import { encode } from '../../../src/store/records.js';
import { tokensTable } from '../../../src/store/schema.js';
import { variedToken } from '../../helpers/records.js';
import { seeded } from '../../helpers/random.js';

describe('ValueNumbers', () => {
  it('numbers equal bytes alike and different bytes apart, and stops numbering a field past its limit', () => {
    const rnd = seeded(7);
    const numbers = new ValueNumbers(2);
    const seen = new Map<string, number>();
    // Values of one to three bytes from a small alphabet: many repeats, many near-misses of one byte.
    for (let i = 0; i < 3000; i++) {
      const value = Uint8Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => 97 + Math.floor(rnd() * 12));
      const bytes = Uint8Array.of(0xff, ...value, 0xff);
      const n = numbers.of(0, bytes, 1, 1 + value.length);
      const key = Buffer.from(value).toString('latin1');
      const before = seen.get(key);
      if (before === undefined) {
        expect([...seen.values()]).not.toContain(n);
        seen.set(key, n);
      } else expect(n).toBe(before);
      expect(n).toBeGreaterThan(0);
    }
    expect(numbers.of(0, Uint8Array.of(1), -1, -1)).toBe(0);
    // Field 1 numbers its own values: 4,096 distinct ones, then no more (a creation time's).
    const distinct = (i: number) => Buffer.from(`2026-12-07T06:${String(i).padStart(6, '0')}Z`);
    for (let i = 0; i < 4096; i++) expect(numbers.of(1, distinct(i), 0, distinct(i).length)).toBe(i + 1);
    expect(numbers.of(1, distinct(4096), 0, distinct(4096).length)).toBe(-1);
    expect(numbers.of(1, distinct(5), 0, distinct(5).length)).toBe(-1);
    // Field 0 is unaffected, and a cleared field numbers again from 1.
    expect(numbers.of(0, Uint8Array.of(0xff, 97, 0xff), 1, 2)).toBe(seen.get('a'));
    numbers.clear();
    expect(numbers.of(1, distinct(5), 0, distinct(5).length)).toBe(1);
  });

  it('gives a memo no key when one of its values is not numbered', () => {
    const memo = new KeyMemo<string>(Int32Array.of(0, 2));
    expect(memo.keyOf(Int32Array.of(3, -1, 0))).toBeGreaterThanOrEqual(0);
    expect(memo.keyOf(Int32Array.of(3, 5, 0))).toBe(memo.keyOf(Int32Array.of(3, -1, 0)));
    expect(memo.keyOf(Int32Array.of(3, 0, -1))).toBe(-1);
    expect(memo.keyOf(Int32Array.of(1, 0, 2))).not.toBe(memo.keyOf(Int32Array.of(2, 0, 1)));
    memo.set(-1, 'never');
    expect(memo.get(-1)).toBeUndefined();
  });
});

describe('a load with remembered index keys', () => {
  it('indexes as the object table does when values repeat, differ every record, and are refused midway', () => {
    const rnd = seeded(11);
    const objects = new MemTable<TokenRecord, string>(tokensTable);
    const compact = new CompactTable<TokenRecord, string>(tokensTable, tokenCodec(64));
    const tokens: TokenRecord[] = [];
    // Past the numbering limit of the policy links (half the records link a policy of their own),
    // with namespaces, roles and services repeating.
    for (let i = 0; i < 10_000; i++) tokens.push(variedToken(i, rnd));
    for (const [i, t] of tokens.entries()) {
      expect(objects.loadStored(encode(t))).toBe(true);
      expect(compact.loadStored(encode(t))).toBe(true);
      // A record whose repeated values were met before but whose links are not a list: refused, nothing kept.
      if (i % 1000 === 999) {
        const bad = { ...t, AccessorID: `bad-${i}`, SecretID: `bad-${i}`, Roles: 'role-0' };
        expect(compact.loadStored(encode(bad))).toBe(false);
        expect(objects.loadStored(encode(bad))).toBe(false);
      }
    }
    objects.finishLoading();
    compact.finishLoading();
    expect(compact.size).toBe(objects.size);
    for (const index of ['policy', 'role', 'service', 'scope', 'authMethod', 'local', 'created', 'quota']) {
      const keys = [...objects.indexKeys(index)].sort();
      expect([...compact.indexKeys(index)].sort()).toEqual(keys);
      for (const key of keys) expect([...compact.sortedMembers(index, key)]).toEqual([...objects.sortedMembers(index, key)]);
    }
    expect(compact.get('bad-999')).toBeUndefined();
    expect(compact.uniqueID('secret', 'bad-999')).toBeUndefined();
  });
});
