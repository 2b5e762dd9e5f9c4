import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Positional } from '../../../src/store/compact/positional.js';
import { ValueMemo, skip, stringAt } from '../../../src/store/compact/msgpack-fields.js';
import { encode } from '../../../src/store/records.js';

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
      // Where each declared field's value starts in the map, read as a record enters a compact table.
      const positional = new Positional(['AccessorID', 'SecretID', 'Description', ...values.map((_, j) => `f${j}`)]);
      expect(positional.fromMap(bytes)).toBeDefined();
      expect(stringAt(bytes, positional.starts[0] as number)).toBe(accessor);
      expect(positional.starts[1]).toBe(-1);
      expect(stringAt(bytes, positional.starts[2] as number)).toBe(description);
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

  it('skips a value of each msgpack format by its exact size, and says when one is cut short', () => {
    const str = [0x61, 0x62, 0x63];
    const formats: Array<[string, number[]]> = [
      ['positive fixint', [0x7f]],
      ['negative fixint', [0xe0]],
      ['nil', [0xc0]],
      ['false', [0xc2]],
      ['true', [0xc3]],
      ['bin 8', [0xc4, 3, ...str]],
      ['bin 16', [0xc5, 0, 3, ...str]],
      ['bin 32', [0xc6, 0, 0, 0, 3, ...str]],
      ['ext 8', [0xc7, 3, 1, ...str]],
      ['ext 16', [0xc8, 0, 3, 1, ...str]],
      ['ext 32', [0xc9, 0, 0, 0, 3, 1, ...str]],
      ['float 32', [0xca, 1, 2, 3, 4]],
      ['float 64', [0xcb, 1, 2, 3, 4, 5, 6, 7, 8]],
      ['uint 8', [0xcc, 1]],
      ['uint 16', [0xcd, 1, 2]],
      ['uint 32', [0xce, 1, 2, 3, 4]],
      ['uint 64', [0xcf, 1, 2, 3, 4, 5, 6, 7, 8]],
      ['int 8', [0xd0, 1]],
      ['int 16', [0xd1, 1, 2]],
      ['int 32', [0xd2, 1, 2, 3, 4]],
      ['int 64', [0xd3, 1, 2, 3, 4, 5, 6, 7, 8]],
      ['fixext 1', [0xd4, 1, 9]],
      ['fixext 2', [0xd5, 1, 9, 9]],
      ['fixext 4', [0xd6, 1, 9, 9, 9, 9]],
      ['fixext 8', [0xd7, 1, ...Array<number>(8).fill(9)]],
      ['fixext 16', [0xd8, 1, ...Array<number>(16).fill(9)]],
      ['str 8', [0xd9, 3, ...str]],
      ['str 16', [0xda, 0, 3, ...str]],
      ['str 32', [0xdb, 0, 0, 0, 3, ...str]],
      ['fixarray', [0x92, 0x01, 0xa1, 0x61]],
      ['array 16', [0xdc, 0, 2, 0xcd, 1, 2, 0xc0]],
      ['array 32', [0xdd, 0, 0, 0, 2, 0x81, 0xa1, 0x61, 0x90, 0xc3]],
      ['fixmap', [0x81, 0xa1, 0x61, 0x01]],
      ['map 16', [0xde, 0, 1, 0xa1, 0x61, 0xd9, 3, ...str]],
      ['map 32', [0xdf, 0, 0, 0, 1, 0xa1, 0x61, 0x92, 0xc2, 0xc3]],
    ];
    for (let n = 0; n < 32; n++) formats.push([`fixstr of ${n}`, [0xa0 + n, ...Array<number>(n).fill(0x78)]]);
    for (const [name, value] of formats) {
      // A value then a nil: skip lands exactly on the nil.
      expect(skip(Uint8Array.from([...value, 0xc0]), 0), name).toBe(value.length);
      expect(skip(Uint8Array.from([0xc0, ...value]), 1), name).toBe(value.length + 1);
      // Cut short by a byte: past the end.
      expect(skip(Uint8Array.from(value.slice(0, -1)), 0), name).toBeGreaterThan(value.length - 1);
    }
    // 0xc1 is no value; past the end is none either.
    expect(skip(Uint8Array.from([0xc1, 0xc0]), 0)).toBe(Number.POSITIVE_INFINITY);
    expect(skip(Uint8Array.from([0xc0]), 1)).toBeGreaterThan(1);
  });

  it('remembers the last string of each field by its bytes: the same bytes give the same string, others their own', () => {
    const memo = new ValueMemo();
    const texts = ['default', 'default', randomUUID(), 'team-a', 'a'.repeat(300), 'a'.repeat(300), 'é-ns', 'default'];
    const made = texts.map((t) => {
      const bytes = encode(['x', t]);
      return memo.text(0, bytes, skip(bytes, 1));
    });
    expect(made).toEqual(texts);
    // A value cut short is read as it is (undefined), and remembered as nothing.
    const cut = encode('team-a').subarray(0, 4);
    expect(memo.text(0, cut, 0)).toBeUndefined();
    expect(memo.text(0, encode('team-a'), 0)).toBe('team-a');
  });

  it("finds each field's value in a positional record, absent ones as -1, and refuses other bytes", () => {
    const positional = new Positional(['AccessorID', 'SecretID', 'Description']);
    const record = positional.fromMap(encode({ AccessorID: 'a1', Description: 'd' })) as Uint8Array;
    const starts = new Int32Array(3);
    expect(positional.startsIn(record, starts)).toBe(true);
    expect(stringAt(record, starts[0] as number)).toBe('a1');
    expect(starts[1]).toBe(-1);
    expect(stringAt(record, starts[2] as number)).toBe('d');
    expect(positional.startsIn(encode({ AccessorID: 'a1' }), starts)).toBe(false);
    expect(positional.startsIn(new Positional(['AccessorID']).fromMap(encode({ AccessorID: 'a1' })) as Uint8Array, starts)).toBe(false);
    expect(positional.startsIn(record.subarray(0, record.length - 1), starts)).toBe(false);
  });

  it('says so when the bytes are not a map of declared fields', () => {
    const positional = new Positional(['AccessorID', 'SecretID', 'Description']);
    expect(positional.fromMap(encode(['AccessorID', 'x']))).toBeUndefined();
    expect(positional.fromMap(encode('AccessorID'))).toBeUndefined();
    expect(positional.fromMap(encode({ AccessorID: 'a', Meta: 42 }))).toBeUndefined();
  });
});
