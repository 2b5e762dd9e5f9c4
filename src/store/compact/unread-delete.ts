import type { IndexDef } from '../schema.js';
import { KeyMemo, ValueNumbers } from './key-memo.js';
import { ValueMemo, readFields } from './msgpack-fields.js';
import { type Multi, type TableParts, leaveKey } from './table-loader.js';

/** Deletes after which the numbering and the keys found by it start again (a field past its limit is numbered again). */
const RESTART_EVERY = 65_536;
const NO_FIELDS: readonly string[] = [];

/**
 * A record taken out of its indexes from its stored bytes, without decoding it: the reaper's bulk
 * deletes and a follower's deletes. The unique keys leave their tables by slot (an IdTable keeps
 * each slot's key); each non-unique index's keys are found by the numbers of the values it reads,
 * numbered by their bytes as a load numbers them (key-memo.ts), so a list of links or a scope
 * shared by many tokens is decoded and keyed once, not once per token.
 */
export class UnreadDelete<R> {
  private readonly starts: Int32Array;
  private readonly ends: Int32Array;
  /** Where each of the indexed fields starts and ends in the record being deleted. */
  private readonly at: Int32Array;
  private readonly to: Int32Array;
  private readonly values: ValueNumbers;
  private readonly numbers: Int32Array;
  /** The indexed fields the non-unique indexes read, and per index which ones. */
  private readonly numbered: Int32Array;
  private readonly readsOf: Int32Array[];
  private readonly timeReads: Int32Array;
  /** Per non-unique index: its keys, by the numbers of the values it reads. */
  private readonly keysOf: Array<KeyMemo<string[]>>;
  private readonly found: Array<string[] | undefined>;
  private readonly notRead: boolean[];
  private readonly memo = new ValueMemo();
  private deletes = 0;
  /** Which of the indexed fields each `answer` list names (a caller passes the same few lists). */
  private readonly answers = new Map<readonly string[], Int32Array>();

  constructor(private readonly parts: TableParts<R>) {
    const { def, indexFields, multi, fields } = parts;
    this.starts = new Int32Array(fields.length);
    this.ends = new Int32Array(fields.length);
    this.at = new Int32Array(indexFields.length);
    this.to = new Int32Array(indexFields.length);
    this.readsOf = multi.map((m) => Int32Array.from((def.indexes[m.name] as IndexDef<R>).reads, (f) => indexFields.indexOf(f)));
    this.timeReads = Int32Array.from(def.orderedBy?.reads ?? [], (f) => indexFields.indexOf(f));
    this.numbered = Int32Array.from(new Set(this.readsOf.flatMap((r) => [...r])));
    this.keysOf = this.readsOf.map((reads) => new KeyMemo<string[]>(reads));
    this.found = multi.map(() => undefined);
    this.values = new ValueNumbers(indexFields.length);
    this.numbers = new Int32Array(indexFields.length);
    this.notRead = indexFields.map(() => false);
  }

  /**
   * Takes the positional record in `slot` out of the unique and non-unique indexes and the time
   * order (not out of the ID table or the arena). Answers the fields of `answer` (indexed fields),
   * those it decoded for keys, and the time order's unless `time` is where the order holds the
   * slot (the reaper found it there: its time needs no decoding); undefined when the bytes are not
   * a positional record, with nothing changed but the time order left at `time` (the caller's
   * decoded delete then leaves the rest).
   */
  unindex(slot: number, answer = NO_FIELDS, time?: number): Partial<R> | undefined {
    const { arena, positional, inFields, indexFields, codec, multi, unique, order, def } = this.parts;
    const bytes = arena.get(slot);
    const { starts, ends, at, to, numbers, keysOf, found, notRead, readsOf } = this;
    if (!positional.startsIn(bytes, starts, ends)) return undefined;
    if (++this.deletes >= RESTART_EVERY) this.restart();
    for (let i = 0; i < at.length; i++) {
      const f = inFields[i] as number;
      const pos = starts[f] as number;
      at[i] = pos;
      to[i] = ends[f] as number;
      notRead[i] = true;
    }
    const left = time !== undefined && order.delete(time, slot);
    if (!left) for (const f of this.timeReads) notRead[f] = false;
    for (const f of this.fieldsOf(answer)) notRead[f] = false;
    for (const f of this.numbered) numbers[f] = this.values.of(f, bytes, at[f] as number, to[f] as number);
    for (let i = 0; i < multi.length; i++) {
      const memo = keysOf[i] as KeyMemo<string[]>;
      const keys = memo.get(memo.keyOf(numbers));
      found[i] = keys;
      if (keys === undefined) for (const f of readsOf[i] as Int32Array) notRead[f] = false;
    }
    const fields = readFields(bytes, indexFields, at, codec.decodeValue, notRead, this.memo) as R | undefined;
    if (fields === undefined) return undefined;
    for (let i = 0; i < multi.length; i++) {
      let keys = found[i];
      if (keys === undefined) {
        const made: string[] = [];
        (multi[i] as Multi).keys(fields, (k) => made.push(k));
        const memo = keysOf[i] as KeyMemo<string[]>;
        memo.set(memo.keyOf(numbers), made);
        keys = made;
      }
      for (let k = 0; k < keys.length; k++) leaveKey(multi[i] as Multi, keys[k] as string, slot);
    }
    // A unique key another record took over (in the same batch) stays with it.
    for (const u of unique) u.table.deleteSlot(slot);
    if (!left) {
      const at = def.orderedBy?.time(fields);
      if (at !== undefined) order.delete(at, slot);
    }
    return fields;
  }

  private fieldsOf(answer: readonly string[]): Int32Array {
    let fields = this.answers.get(answer);
    if (fields === undefined) {
      const { indexFields } = this.parts;
      fields = Int32Array.from(answer, (name) => {
        const f = indexFields.indexOf(name);
        if (f === -1) throw new Error(`${this.parts.def.name}: an unread delete answers only indexed fields, not ${name}`);
        return f;
      });
      if (this.answers.size < 64) this.answers.set(answer, fields);
    }
    return fields;
  }

  private restart(): void {
    this.deletes = 0;
    this.values.clear();
    for (const m of this.keysOf) m.clear();
    this.memo.clear();
  }
}
