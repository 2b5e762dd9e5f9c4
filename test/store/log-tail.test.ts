import { describe, expect, it } from 'vitest';
import { LogTail } from '../../src/store/log-tail.js';
import { encode } from '../../src/store/records.js';

const entry = (i: number) => ({ Index: i, Table: 'tokens', Op: 'put', ID: `id-${i}`, Value: { Description: 'x'.repeat(600 + (i % 200)) } });

describe('the change log tail', () => {
  it('holds its entries in buffers of its own, not the pool slabs they were encoded into', () => {
    const tail = new LogTail(20_000);
    const sizes: number[] = [];
    const keep: Buffer[] = [];
    // One past 25,000: trimmed to the last 20,000.
    for (let i = 1; i <= 25_001; i++) {
      // Each entry a small Buffer cut from node's shared pool, with short-lived allocations cut between them.
      const bytes = Buffer.concat([encode(entry(i))]);
      expect(bytes.buffer.byteLength).toBeGreaterThan(bytes.byteLength);
      keep.push(Buffer.allocUnsafe(2000));
      if (keep.length > 8) keep.shift();
      tail.remember(i, bytes);
      sizes.push(bytes.byteLength);
    }
    const own = sizes.slice(-20_000).reduce((a, b) => a + b, 0);
    // The entries' own bytes, in buffers of 1 MiB: the first and the last not all theirs.
    expect(tail.heldBytes).toBeLessThan(own + (2 << 20));
    expect(tail.after(25_001 - 3, 10)?.map((e) => e.Index)).toEqual([25_001 - 2, 25_001 - 1, 25_001]);
    expect(tail.after(5000, 1)).toBeUndefined();
    expect(tail.after(5002, 2)).toEqual([entry(5003), entry(5004)]);
  });

  it('drops its front a quarter at a time, then answers from the disk', () => {
    const tail = new LogTail(100);
    for (let i = 1; i <= 126; i++) tail.remember(i, encode(entry(i)));
    expect(tail.after(25, 1)).toBeUndefined();
    expect(tail.after(26, 1)).toEqual([entry(27)]);
    tail.reset(500);
    expect(tail.after(498, 1)).toBeUndefined();
    tail.remember(500, encode(entry(500)));
    expect(tail.after(499, 5)).toEqual([entry(500)]);
    expect(tail.heldBytes).toBe(1 << 20);
  });
});
