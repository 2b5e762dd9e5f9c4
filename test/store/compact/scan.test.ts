import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { fieldOffsets, skip, stringAt } from '../../../src/store/compact/scan.js';
import { encode } from '../../../src/store/records.js';

const keys = [Buffer.from('AccessorID'), Buffer.from('SecretID'), Buffer.from('Description')];

describe('reading fields of a msgpack record without decoding it', () => {
  it('finds string fields wherever they sit, past values of every kind', () => {
    const values: unknown[] = [
      null,
      true,
      false,
      0,
      127,
      128,
      65_535,
      2 ** 32 + 5,
      -1,
      -33,
      -40_000,
      1.5,
      '',
      'x'.repeat(40),
      'é'.repeat(300),
      [],
      [1, [2, { a: 'b' }]],
      { nested: { deeper: [null] } },
      Array.from({ length: 20 }, (_, i) => i),
      new Uint8Array(300),
      Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i])),
    ];
    for (let i = 0; i < 200; i++) {
      const record: Record<string, unknown> = {};
      const accessor = randomUUID();
      const description = i % 3 === 0 ? `für ${i}` : `plain ${i}`;
      const order: Array<[string, unknown]> = values.map((v, j): [string, unknown] => [`f${j}`, v]).sort(() => Math.random() - 0.5);
      order.splice(i % order.length, 0, ['AccessorID', accessor]);
      order.splice((i * 7) % order.length, 0, ['Description', description]);
      for (const [k, v] of order) record[k] = v;
      const bytes = encode(record);
      const at = new Int32Array(3);
      expect(fieldOffsets(bytes, keys, at)).toBe(true);
      expect(stringAt(bytes, at[0] as number)).toBe(accessor);
      expect(at[1]).toBe(-1);
      expect(stringAt(bytes, at[2] as number)).toBe(description);
    }
  });

  it('skips each value exactly', () => {
    for (const v of [
      null,
      1,
      -1,
      300,
      2 ** 40,
      1.25,
      'abc',
      'x'.repeat(70_000),
      [1, 'a', [null]],
      { a: { b: [1, 2] } },
      new Uint8Array(70_000),
    ]) {
      const bytes = encode([v, 'end']);
      // An array of two: the header byte, then the value, then 'end'.
      expect(stringAt(bytes, skip(bytes, 1))).toBe('end');
    }
  });

  it('says so when the bytes are not a map', () => {
    expect(fieldOffsets(encode(['AccessorID', 'x']), keys, new Int32Array(3))).toBe(false);
    expect(fieldOffsets(encode('AccessorID'), keys, new Int32Array(3))).toBe(false);
  });
});
