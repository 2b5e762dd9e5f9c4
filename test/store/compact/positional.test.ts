import { describe, expect, it } from 'vitest';
import { Positional } from '../../../src/store/compact/positional.js';
import { decodeRaw, encode } from '../../../src/store/records.js';

const FIELDS = ['ID', 'Name', 'Links', 'Local', 'Expires', 'Index'];
const roundTrip = (p: Positional, value: Record<string, unknown>) => {
  const bytes = p.fromMap(encode(value));
  if (bytes === undefined) return undefined;
  expect(Positional.is(bytes)).toBe(true);
  return p.toRecord(decodeRaw(Buffer.from(bytes)) as unknown[]);
};

describe('Positional', () => {
  it('keeps the values of a map in field order without its keys, and gives the same record back', () => {
    const p = new Positional(FIELDS);
    const full = { Index: 70_000, Name: 'n', ID: 'a', Links: [{ ID: 'x' }], Local: false, Expires: '2030-01-01T00:00:00Z' };
    expect(roundTrip(p, full)).toEqual(full);
    // Absent fields stay absent (not undefined members).
    const sparse = { ID: 'b', Local: true };
    expect(Object.keys(roundTrip(p, sparse) ?? {})).toEqual(['ID', 'Local']);
    const stored = encode(full);
    expect((p.fromMap(stored) as Uint8Array).length).toBeLessThan(stored.length - 30);
  });

  it('keeps a map with a key it does not know, or that is not a map, as it is', () => {
    const p = new Positional(FIELDS);
    expect(p.fromMap(encode({ ID: 'a', Other: 1 }))).toBeUndefined();
    expect(p.fromMap(encode(['a']))).toBeUndefined();
    expect(p.fromMap(Uint8Array.of(0x81, 0xa2, 0x49))).toBeUndefined();
  });

  it('reads maps whose keys come in another order than the last one, or with one left out, or twice', () => {
    const p = new Positional(FIELDS);
    const records = [
      { ID: 'a', Name: 'n', Links: [], Local: false, Index: 1 },
      { ID: 'b', Name: 'm', Links: [], Local: true, Index: 2 },
      { Name: 'o', ID: 'c', Local: false, Links: [{ ID: 'x' }], Index: 3 },
      { ID: 'd', Local: true, Index: 4 },
      { ID: 'e', Expires: '2030-01-01T00:00:00Z', Name: 'p', Links: [], Local: false, Index: 5 },
      { ID: 'f', Name: 'q', Links: [], Local: false, Index: 6 },
    ];
    for (const r of records) expect(roundTrip(p, r)).toEqual(r);
    // The same key twice is no record of these fields, even where the last map had that key (Name, then ID).
    expect(roundTrip(p, records[2] as Record<string, unknown>)).toEqual(records[2]);
    expect(p.fromMap(Uint8Array.from([0x82, 0xa2, 0x49, 0x44, 0xa1, 0x61, 0xa2, 0x49, 0x44, 0xa1, 0x62]))).toBeUndefined();
  });

  it('grows its scratch space for a record larger than it', () => {
    const p = new Positional(FIELDS);
    const big = { ID: 'big', Name: 'x'.repeat(200_000) };
    expect(roundTrip(p, big)).toEqual(big);
    expect(roundTrip(p, { ID: 'small' })).toEqual({ ID: 'small' });
  });

  it('keeps positional bytes as they are, pads those of fewer fields, and refuses those of more or cut short', () => {
    const p = new Positional(FIELDS);
    const full = { ID: 'a', Name: 'n', Links: [{ ID: 'x' }], Local: false, Expires: '2030-01-01T00:00:00Z', Index: 7 };
    const positional = Buffer.from(p.fromMap(encode(full)) as Uint8Array);
    // A map and its positional form are kept alike; the positional one is not copied.
    expect(Buffer.from(p.keep(encode(full)) as Uint8Array)).toEqual(positional);
    expect(p.keep(positional)).toBe(positional);
    expect([...p.outStarts]).toEqual([...p.starts]);
    // Fewer fields (a release that knew fewer): the rest absent. More fields or a short value: refused.
    const older = new Positional(FIELDS.slice(0, 4));
    const short = Buffer.from(older.fromMap(encode({ ID: 'b', Name: 'm', Local: true })) as Uint8Array);
    const padded = p.keep(short) as Uint8Array;
    expect(padded.length).toBe(short.length + 2);
    expect(p.toRecord(decodeRaw(Buffer.from(padded)) as unknown[])).toEqual({ ID: 'b', Name: 'm', Local: true });
    expect(older.keep(positional)).toBeUndefined();
    expect(p.keep(positional.subarray(0, positional.length - 1))).toBeUndefined();
    expect(p.keep(Buffer.concat([positional, Buffer.of(0xc0)]))).toBeUndefined();
    // Into a chunk: at an offset, -2 when it does not fit, the starts from that record's start.
    const chunk = new Uint8Array(positional.length + 10);
    expect(p.keepInto(positional, chunk, 11)).toBe(-2);
    expect(p.keepInto(positional, chunk, 10)).toBe(positional.length + 10);
    expect(Buffer.from(chunk.subarray(10))).toEqual(positional);
    expect(p.outStarts[1]).toBe(p.starts[1]);
    expect(p.keepInto(short, chunk, 0)).toBe(padded.length);
    expect(Buffer.from(chunk.subarray(0, padded.length))).toEqual(Buffer.from(padded));
  });
});
