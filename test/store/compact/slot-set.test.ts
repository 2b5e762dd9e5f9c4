import { describe, expect, it } from 'vitest';
import { SlotSet } from '../../../src/store/compact/slot-set.js';

describe('SlotSet', () => {
  it('answers as a Set does through random adds and deletes, across growth and shrinking', () => {
    const set = new SlotSet();
    const model = new Set<number>();
    let x = 12345;
    const next = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0);
    for (let op = 0; op < 60_000; op++) {
      // Grow for the first half, shrink for the second: every resize is crossed both ways.
      const slot = next() % 5000;
      const adding = op < 30_000 ? next() % 4 !== 0 : next() % 4 === 0;
      if (adding) {
        set.add(slot);
        model.add(slot);
      } else expect(set.delete(slot)).toBe(model.delete(slot));
      // Every invariant after each step while the set is small, then now and then (and across the turn to shrinking).
      if (op < 5000 || op % 101 === 0 || (op > 29_000 && op < 31_000)) set.verify();
      if (op % 997 === 0) {
        expect(set.size).toBe(model.size);
        expect([...set.toArray()].sort((a, b) => a - b)).toEqual([...model].sort((a, b) => a - b));
        for (let s = 0; s < 5000; s += 7) expect(set.has(s)).toBe(model.has(s));
      }
    }
    for (const s of [...model]) expect(set.delete(s)).toBe(true);
    expect(set.size).toBe(0);
    expect(set.bytes).toBeLessThanOrEqual(16);
  });

  it('holds a million members of a million slots as a bitmap', () => {
    const set = new SlotSet();
    for (let s = 0; s < 1_000_000; s++) set.add(s);
    expect(set.size).toBe(1_000_000);
    expect(set.bytes).toBeLessThanOrEqual(256 * 1024);
    expect(set.has(999_999)).toBe(true);
    expect(set.has(1_000_000)).toBe(false);
    expect(set.toArray().every((s, i) => s === i)).toBe(true);
  });

  it('keeps members spread over many slots hashed, and goes back to hashing when a bitmap thins out or widens', () => {
    const spread = new SlotSet();
    for (let i = 0; i < 1000; i++) spread.add(i * 1000);
    expect(spread.bytes).toBeLessThanOrEqual(8 * 1024);
    expect(spread.has(999_000) && !spread.has(999_001)).toBe(true);

    const dense = new SlotSet();
    for (let s = 0; s < 100_000; s++) dense.add(s);
    expect(dense.bytes).toBeLessThanOrEqual(16 * 1024);
    for (let s = 0; s < 100_000; s++) if (s % 1000 !== 0) dense.delete(s);
    expect([dense.size, dense.bytes <= 4096]).toEqual([100, true]);
    expect([...dense.toArray()].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i * 1000));

    const small = new SlotSet();
    for (let s = 0; s < 64; s++) small.add(s);
    small.add(50_000_000);
    expect([small.size, small.has(50_000_000), small.has(63), small.bytes <= 1024]).toEqual([65, true, true, true]);
  });
});
