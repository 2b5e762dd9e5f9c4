import type { IdTable } from './id-table.js';
import { SlotSet } from './slot-set.js';

/**
 * A compact table as a checkpoint keeps it (store/checkpoint.ts): JSON for what is small, and
 * numbered parts of bytes for what is large (typed arrays as they are, the records' bytes). The
 * writer gathers the parts; the reader checks each part's shape as it hands it back, so a dump
 * that does not fit together throws instead of making a table that answers wrongly.
 */

/** A part: bytes, or `length` bytes taken from `stream` (read back into a buffer of `capacity`). */
export type DumpPart = { bytes: Uint8Array } | { length: number; capacity: number; stream: Iterator<Uint8Array> };

/** An IdTable's meta (its arrays are parts). */
export interface IdTableMeta {
  seed: number;
  used: number;
  highest: number;
  other: Array<[string, number]>;
  keys: number;
  /** Each position's slot and key hash, side by side (IdTable). */
  entries: number;
}

/** A map of slot sets: its keys, and the parts of each key's member count and of all members in key order. */
export interface SetsMeta<K> {
  keys: K[];
  counts: number;
  members: number;
}

/** What a dump says besides its parts (numbers name parts). */
export interface TableDumpMeta {
  arena: { top: number; chunkOf: number; offsetOf: number; lengthOf: number; chunks: Array<{ part: number; fill: number }> };
  ids: IdTableMeta;
  unique: Array<{ name: string } & IdTableMeta>;
  multi: Array<{ name: string } & SetsMeta<string>>;
  /** The expiry index: its times are a part of 64-bit numbers (`keys`). */
  times: { keys: number; counts: number; members: number };
}

export class DumpWriter {
  readonly parts: DumpPart[] = [];

  add(a: ArrayBufferView): number {
    return this.parts.push({ bytes: new Uint8Array(a.buffer, a.byteOffset, a.byteLength) }) - 1;
  }

  stream(length: number, capacity: number, stream: Iterator<Uint8Array>): number {
    return this.parts.push({ length, capacity, stream }) - 1;
  }

  idTable(t: IdTable): IdTableMeta {
    const d = t.dump();
    return {
      seed: d.seed,
      used: d.used,
      highest: d.highest,
      other: d.other,
      keys: this.add(d.keys),
      entries: this.add(d.entries),
    };
  }

  sets<K>(map: Map<K, SlotSet>): SetsMeta<K> {
    const keys = [...map.keys()];
    const counts = Uint32Array.from(keys, (k) => (map.get(k) as SlotSet).size);
    const members = new Uint32Array(counts.reduce((a, b) => a + b, 0));
    let at = 0;
    for (const k of keys) {
      const m = (map.get(k) as SlotSet).toArray();
      members.set(m, at);
      at += m.length;
    }
    return { keys, counts: this.add(counts), members: this.add(members) };
  }
}

export class DumpReader {
  /** `parts` as written, a streamed part in a buffer of its capacity. */
  constructor(private readonly parts: readonly Buffer[]) {}

  part(i: number): Buffer {
    const b = this.parts[i];
    if (b === undefined) throw new RangeError(`no part ${i}`);
    return b;
  }

  u32(i: number): Uint32Array {
    const b = this.part(i);
    if (b.byteOffset % 4 !== 0 || b.length % 4 !== 0) throw new RangeError(`part ${i} is not 32-bit words`);
    return new Uint32Array(b.buffer, b.byteOffset, b.length / 4);
  }

  f64(i: number): Float64Array {
    const b = this.part(i);
    if (b.byteOffset % 8 !== 0 || b.length % 8 !== 0) throw new RangeError(`part ${i} is not 64-bit numbers`);
    return new Float64Array(b.buffer, b.byteOffset, b.length / 8);
  }

  idTable(t: IdTable, d: IdTableMeta): void {
    t.restore({
      seed: d.seed,
      used: d.used,
      highest: d.highest,
      other: d.other,
      keys: this.u32(d.keys),
      entries: this.u32(d.entries),
    });
  }

  /** Fills `map` with the sets of `d`; every member must be a slot `has` knows. */
  sets<K>(d: SetsMeta<K>, map: Map<K, SlotSet>, has: (slot: number) => boolean): void {
    const counts = this.u32(d.counts);
    const members = this.u32(d.members);
    if (counts.length !== d.keys.length || counts.reduce((x, y) => x + y, 0) !== members.length)
      throw new RangeError('index members do not add up');
    let at = 0;
    d.keys.forEach((k, i) => {
      const set = new SlotSet();
      for (const end = at + (counts[i] as number); at < end; at++) {
        const slot = members[at] as number;
        if (!has(slot)) throw new RangeError(`an index holds slot ${slot}, which has no record`);
        set.add(slot);
      }
      map.set(k, set);
    });
  }
}
