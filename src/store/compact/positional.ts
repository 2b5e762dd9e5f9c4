import { keyAt, mapEntries, sameBytes, skip } from './msgpack-fields.js';

const signature = (length: number, first: number, last: number): number => (length << 16) | (first << 8) | last;

/** A positional record's values (decoded as a list) named by `fields`: nil, or past the list's end, is absent. */
export function namedValues(fields: readonly string[], values: readonly unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let f = 0; f < fields.length; f++) {
    const v = values[f];
    if (v !== null && v !== undefined) out[fields[f] as string] = v;
  }
  return out;
}

/**
 * A record's bytes as a compact table keeps them: its stored msgpack map with the keys taken
 * out, the values in a fixed field order (a msgpack array, nil where a field is absent). A
 * token's field names are ~170 of its ~390 stored bytes; in memory they are said once, here.
 * The change is made byte by byte as a record enters the table, without decoding it. A map with
 * a key this list does not know has no positional form (`fromMap` answers undefined): the table
 * refuses it.
 *
 * A store of format 3 keeps tokens on disk in this form too (store/disk-format.ts), so a value
 * read from disk is either: `keep` takes both, copying a positional one as it is. A positional
 * value of fewer fields than this list (written by a release that knew fewer: fields are only
 * ever added at the end) has the rest absent; one of more is refused.
 */
export class Positional {
  private readonly keys: Uint8Array[];
  /** After `fromMap`: where each field's value starts in the map given (-1: absent). */
  readonly starts: Int32Array;
  /** After `fromMap` (or `fromMapInto`): where each field's value starts in the positional bytes written, from their start (-1: absent). */
  readonly outStarts: Int32Array;
  /** After `fromMap` or `keep`: where each present field's value ends in the bytes given. */
  readonly ends: Int32Array;
  private readonly cursor = new Int32Array(2);
  private scratch = Buffer.allocUnsafeSlow(64 * 1024);
  /** Fields by their name's length, first and last byte: most keys are told apart by that alone. */
  private readonly bySignature = new Map<number, number[]>();
  /** The field of each key position in the last map read: records written alike list their keys alike. */
  private readonly lastOrder: Int32Array;

  constructor(readonly fields: readonly string[]) {
    if (fields.length > 0xffff) throw new RangeError('too many fields');
    this.keys = fields.map((f) => new Uint8Array(Buffer.from(f)));
    this.keys.forEach((k, f) => {
      const sig = signature(k.length, k[0] as number, k[k.length - 1] as number);
      this.bySignature.set(sig, [...(this.bySignature.get(sig) ?? []), f]);
    });
    this.lastOrder = new Int32Array(fields.length).fill(-1);
    this.starts = new Int32Array(fields.length);
    this.outStarts = new Int32Array(fields.length);
    this.ends = new Int32Array(fields.length);
  }

  /**
   * The positional form of the map in `bytes`: a view of a scratch buffer, valid until the next
   * call (the arena copies it at once). Undefined when `bytes` is not a map of known keys.
   */
  fromMap(bytes: Uint8Array): Uint8Array | undefined {
    const size = this.read(bytes);
    if (size < 0) return undefined;
    if (size > this.scratch.length) this.scratch = Buffer.allocUnsafeSlow(size * 2);
    return this.scratch.subarray(0, this.write(bytes, this.scratch, 0));
  }

  /**
   * `fromMap` written into `out` at `at`: where it ends there; -1 when `bytes` is not a map of
   * known keys, -2 when it does not fit (nothing written then).
   */
  fromMapInto(bytes: Uint8Array, out: Uint8Array, at: number): number {
    const size = this.read(bytes);
    if (size < 0) return -1;
    if (at + size > out.length) return -2;
    return this.write(bytes, out, at);
  }

  /**
   * The positional form of `bytes`, a map or already positional: `bytes` themselves when they
   * are positional of this field list, else a view of a scratch buffer as `fromMap` gives.
   * `starts` say where each field's value starts in `bytes`, `outStarts` in what is answered.
   */
  keep(bytes: Uint8Array): Uint8Array | undefined {
    if (bytes[0] !== 0xdc) return this.fromMap(bytes);
    const size = this.readPositional(bytes);
    if (size < 0) return undefined;
    if (size === bytes.length) {
      this.outStarts.set(this.starts);
      return bytes;
    }
    if (size > this.scratch.length) this.scratch = Buffer.allocUnsafeSlow(size * 2);
    return this.scratch.subarray(0, this.write(bytes, this.scratch, 0));
  }

  /** `keep` written into `out` at `at`, as `fromMapInto` answers. */
  keepInto(bytes: Uint8Array, out: Uint8Array, at: number): number {
    if (bytes[0] !== 0xdc) return this.fromMapInto(bytes, out, at);
    const size = this.readPositional(bytes);
    if (size < 0) return -1;
    if (at + size > out.length) return -2;
    if (size !== bytes.length) return this.write(bytes, out, at);
    out.set(bytes, at);
    this.outStarts.set(this.starts);
    return at + size;
  }

  /** Finds each field's value in positional `bytes` (`starts`, `ends`): the size of their form with this field list, or -1. */
  private readPositional(bytes: Uint8Array): number {
    const { starts, ends } = this;
    const n = this.keys.length;
    const count = bytes.length < 3 ? n + 1 : ((bytes[1] as number) << 8) | (bytes[2] as number);
    if (count > n) return -1;
    starts.fill(-1);
    let pos = 3;
    for (let f = 0; f < count; f++) {
      if (pos >= bytes.length) return -1;
      const end = skip(bytes, pos);
      if (end > bytes.length) return -1;
      if (bytes[pos] !== 0xc0) {
        starts[f] = pos;
        ends[f] = end;
      }
      pos = end;
    }
    return pos === bytes.length ? pos + (n - count) : -1;
  }

  /** Finds each field's value in the map `bytes` (`starts`, `ends`): the positional form's size, or -1. */
  private read(bytes: Uint8Array): number {
    const { keys, starts, ends, cursor, lastOrder } = this;
    starts.fill(-1);
    const n = mapEntries(bytes, cursor);
    if (n < 0) return -1;
    let pos = cursor[0] as number;
    let size = 3;
    for (let i = 0; i < n; i++) {
      if (!keyAt(bytes, pos, cursor)) return -1;
      const kstart = cursor[0] as number;
      const klen = cursor[1] as number;
      pos = kstart + klen;
      // The field at this position last time, if its name is here again; else looked up.
      const guess = i < lastOrder.length ? (lastOrder[i] as number) : -1;
      let field =
        guess !== -1 &&
        (keys[guess] as Uint8Array).length === klen &&
        starts[guess] === -1 &&
        sameBytes(keys[guess] as Uint8Array, bytes, kstart)
          ? guess
          : -1;
      if (field === -1) {
        const candidates =
          klen === 0 ? undefined : this.bySignature.get(signature(klen, bytes[kstart] as number, bytes[kstart + klen - 1] as number));
        for (let c = 0; field === -1 && candidates !== undefined && c < candidates.length; c++) {
          const f = candidates[c] as number;
          const key = keys[f] as Uint8Array;
          // The signature includes the length: the same length is given.
          if (starts[f] === -1 && sameBytes(key, bytes, kstart)) field = f;
        }
      }
      if (field === -1) return -1;
      if (i < lastOrder.length) lastOrder[i] = field;
      const end = skip(bytes, pos);
      if (end > bytes.length) return -1;
      starts[field] = pos;
      ends[field] = end;
      size += end - pos;
      pos = end;
    }
    for (let f = 0; f < keys.length; f++) if (starts[f] === -1) size++;
    return size;
  }

  /** Writes the positional form of the map `read` last read into `out` at `at`; where it ends. */
  private write(bytes: Uint8Array, out: Uint8Array, from: number): number {
    const { keys, starts, ends, outStarts } = this;
    out[from] = 0xdc;
    out[from + 1] = keys.length >> 8;
    out[from + 2] = keys.length & 0xff;
    let at = from + 3;
    for (let f = 0; f < keys.length; f++) {
      const s = starts[f] as number;
      if (s === -1) {
        outStarts[f] = -1;
        out[at++] = 0xc0;
      } else {
        outStarts[f] = at - from;
        const e = ends[f] as number;
        // Byte by byte: most values are a few dozen bytes, less than a view of them costs.
        if (e - s <= 64) for (let j = s; j < e; j++) out[at++] = bytes[j] as number;
        else {
          out.set(bytes.subarray(s, e), at);
          at += e - s;
        }
      }
    }
    return at;
  }

  /** Whether `bytes` are in the positional form (else: a map kept as it was). */
  static is(bytes: Uint8Array): boolean {
    return bytes[0] === 0xdc;
  }

  /**
   * Where each field's value starts in positional `bytes`, into `out` (-1: absent, as nil is):
   * one walk over the values, nothing decoded. False when the bytes are not a positional record
   * of this field list. `ends`, when given, gets where each value ends.
   */
  startsIn(bytes: Uint8Array, out: Int32Array, ends?: Int32Array): boolean {
    const n = this.keys.length;
    if (bytes[0] !== 0xdc || (((bytes[1] as number) << 8) | (bytes[2] as number)) !== n) return false;
    let pos = 3;
    for (let f = 0; f < n; f++) {
      if (pos >= bytes.length) return false;
      out[f] = bytes[pos] === 0xc0 ? -1 : pos;
      pos = skip(bytes, pos);
      if (ends !== undefined) ends[f] = pos;
    }
    return pos === bytes.length;
  }

  /** Where the value of field `f` starts in positional bytes. */
  valueAt(bytes: Uint8Array, f: number): number {
    let pos = 3;
    for (let i = 0; i < f; i++) pos = skip(bytes, pos);
    return pos;
  }

  /** The record of positional bytes whose values `unpack` decoded as a list (nil: the field is absent). */
  toRecord(values: readonly unknown[]): Record<string, unknown> {
    return namedValues(this.fields, values);
  }
}
