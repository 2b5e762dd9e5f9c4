import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RecordArena } from '../../../src/store/compact/arena.js';

describe('RecordArena', () => {
  it('gives back the bytes stored under each slot through adds, replaces, deletes and compaction', () => {
    const arena = new RecordArena();
    const model = new Map<number, Buffer>();
    let seed = 1;
    const random = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    // The slots held, for picking one at random (kept beside the model: listing the model each time is quadratic).
    const slots: number[] = [];
    for (let op = 0; op < 30_000; op++) {
      const r = random();
      // Mostly small records; now and then one larger than a chunk.
      const bytes = randomBytes(op % 9973 === 0 ? 17 * 1024 * 1024 : 1 + Math.floor(random() * 600));
      if (r < 0.6 || slots.length === 0) {
        const slot = arena.add(bytes);
        if (model.has(slot)) throw new Error(`slot ${slot} given out twice`);
        model.set(slot, bytes);
        slots.push(slot);
      } else if (r < 0.8) {
        const slot = slots[Math.floor(random() * slots.length)] as number;
        arena.replace(slot, bytes);
        model.set(slot, bytes);
      } else {
        const at = Math.floor(random() * slots.length);
        const slot = slots[at] as number;
        slots[at] = slots[slots.length - 1] as number;
        slots.pop();
        arena.delete(slot);
        model.delete(slot);
        if (arena.has(slot)) throw new Error(`slot ${slot} still held after its delete`);
      }
      if (op % 10_007 === 10_006) arena.compact();
      // Every invariant after each step at first, then now and then (compaction included).
      if (op < 3000 || op % 499 === 0 || op % 10_007 === 10_006) arena.verify();
    }
    const wrong = [...model].filter(([slot, bytes]) => !Buffer.from(arena.get(slot)).equals(bytes)).map(([slot]) => slot);
    expect(wrong).toEqual([]);
    expect(arena.size).toBe(model.size);
    arena.compact();
    expect(arena.garbageBytes).toBe(0);
    expect([...model].filter(([slot, bytes]) => !Buffer.from(arena.get(slot)).equals(bytes))).toEqual([]);
  });

  it('refuses a slot that holds nothing', () => {
    const arena = new RecordArena();
    const slot = arena.add(Uint8Array.of(1, 2, 3));
    arena.delete(slot);
    expect(() => arena.get(slot)).toThrow(RangeError);
    expect(() => arena.delete(slot)).toThrow(RangeError);
    expect(() => arena.get(99)).toThrow(RangeError);
  });
});
