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

  it('holds a million members in a few megabytes', () => {
    const set = new SlotSet();
    for (let s = 0; s < 1_000_000; s++) set.add(s);
    expect(set.size).toBe(1_000_000);
    expect(set.bytes).toBeLessThanOrEqual(8 * 1024 * 1024);
    expect(set.has(999_999)).toBe(true);
    expect(set.has(1_000_000)).toBe(false);
  });
});
