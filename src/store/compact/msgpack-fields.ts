/**
 * Reading a few fields of a msgpack record without decoding it: the load of a compact table
 * needs only what it indexes a record by (a token's IDs, namespace, links, expiry).
 */

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** How many entries the map at the start of `bytes` has (its first key at `at[0]`); -1 when it is not a map. */
export function mapEntries(bytes: Uint8Array, at: Int32Array): number {
  const t = bytes[0] as number;
  if (t >= 0x80 && t <= 0x8f) {
    at[0] = 1;
    return t - 0x80;
  }
  if (t !== 0xde) return -1;
  at[0] = 3;
  return ((bytes[1] as number) << 8) | (bytes[2] as number);
}

/** The map key (a short msgpack str) at `pos`: where its bytes start (`at[0]`) and how many (`at[1]`); false when none is there. */
export function keyAt(bytes: Uint8Array, pos: number, at: Int32Array): boolean {
  const k = bytes[pos] as number;
  if (k >= 0xa0 && k <= 0xbf) {
    at[0] = pos + 1;
    at[1] = k - 0xa0;
  } else if (k === 0xd9) {
    at[0] = pos + 2;
    at[1] = bytes[pos + 1] as number;
  } else return false;
  return true;
}

/** Whether `key` is the bytes at `start` of `bytes`. */
export function sameBytes(key: Uint8Array, bytes: Uint8Array, start: number): boolean {
  for (let j = 0; j < key.length; j++) if (key[j] !== bytes[start + j]) return false;
  return true;
}

/** The string at `pos` (a msgpack str), or undefined when the value there is not a string. */
export function stringAt(bytes: Uint8Array, pos: number): string | undefined {
  const t = bytes[pos] as number;
  let n: number;
  let start: number;
  if (t >= 0xa0 && t <= 0xbf) {
    n = t - 0xa0;
    start = pos + 1;
  } else if (t === 0xd9) {
    n = bytes[pos + 1] as number;
    start = pos + 2;
  } else if (t === 0xda) {
    n = ((bytes[pos + 1] as number) << 8) | (bytes[pos + 2] as number);
    start = pos + 3;
  } else return undefined;
  if (start + n > bytes.length) return undefined;
  for (let i = start; i < start + n; i++) if ((bytes[i] as number) >= 0x80) return utf8.decode(bytes.subarray(start, start + n));
  return Buffer.prototype.latin1Slice.call(bytes, start, start + n);
}

function u16(b: Uint8Array, p: number): number {
  return ((b[p] as number) << 8) | (b[p + 1] as number);
}

function u32(b: Uint8Array, p: number): number {
  return (b[p] as number) * 0x1000000 + (((b[p + 1] as number) << 16) | ((b[p + 2] as number) << 8) | (b[p + 3] as number));
}

/** The position after the msgpack value at `pos`. */
export function skip(b: Uint8Array, pos: number): number {
  const t = b[pos] as number;
  if (t < 0x80 || t >= 0xe0) return pos + 1;
  if (t < 0x90) {
    let p = pos + 1;
    for (let i = 0; i < (t - 0x80) * 2; i++) p = skip(b, p);
    return p;
  }
  if (t < 0xa0) {
    let p = pos + 1;
    for (let i = 0; i < t - 0x90; i++) p = skip(b, p);
    return p;
  }
  if (t < 0xc0) return pos + 1 + (t - 0xa0);
  switch (t) {
    case 0xc0:
    case 0xc2:
    case 0xc3:
      return pos + 1;
    case 0xc4:
    case 0xd9:
      return pos + 2 + (b[pos + 1] as number);
    case 0xc5:
    case 0xda:
      return pos + 3 + u16(b, pos + 1);
    case 0xc6:
    case 0xdb:
      return pos + 5 + u32(b, pos + 1);
    case 0xc7:
      return pos + 3 + (b[pos + 1] as number);
    case 0xc8:
      return pos + 4 + u16(b, pos + 1);
    case 0xc9:
      return pos + 6 + u32(b, pos + 1);
    case 0xca:
      return pos + 5;
    case 0xcb:
      return pos + 9;
    case 0xcc:
    case 0xd0:
      return pos + 2;
    case 0xcd:
    case 0xd1:
      return pos + 3;
    case 0xce:
    case 0xd2:
      return pos + 5;
    case 0xcf:
    case 0xd3:
      return pos + 9;
    case 0xd4:
      return pos + 3;
    case 0xd5:
      return pos + 4;
    case 0xd6:
      return pos + 6;
    case 0xd7:
      return pos + 10;
    case 0xd8:
      return pos + 18;
    case 0xdc:
    case 0xde: {
      const n = u16(b, pos + 1) * (t === 0xde ? 2 : 1);
      let p = pos + 3;
      for (let i = 0; i < n; i++) p = skip(b, p);
      return p;
    }
    case 0xdd:
    case 0xdf: {
      const n = u32(b, pos + 1) * (t === 0xdf ? 2 : 1);
      let p = pos + 5;
      for (let i = 0; i < n; i++) p = skip(b, p);
      return p;
    }
    default:
      return Number.POSITIVE_INFINITY;
  }
}

const NO_ITEMS: readonly never[] = Object.freeze([]);

const latin1Slice = Buffer.prototype.latin1Slice as (this: Uint8Array, start: number, end: number) => string;

/**
 * Values a load has decoded, by their bytes: a list of links or a service identity repeats
 * across many records and is decoded once. The fields a load reads are only looked at (for
 * index keys), so one value serves every record that has it. At most `limit` are kept.
 */
export class ValueMemo {
  private readonly values = new Map<string, unknown>();
  /**
   * Per field: the bytes of the last string read (copied into a buffer of the field's own, so a
   * string that differs every record, an ID, allocates nothing but itself), how many, and the string
   * (a namespace repeats record after record).
   */
  private readonly lastBytes: Uint8Array[] = [];
  private readonly lastLength: number[] = [];
  private readonly lastText: Array<string | undefined> = [];

  constructor(private readonly limit = 4096) {}

  /** The string at `pos` of `bytes`, the value of field `field`: the last one made for it when the bytes are the same. */
  text(field: number, bytes: Uint8Array, pos: number): string | undefined {
    const n = skip(bytes, pos) - pos;
    // Not a whole string here (a corrupt record): read as it is, nothing remembered.
    if (!(n <= bytes.length - pos)) return stringAt(bytes, pos);
    let last = this.lastBytes[field];
    if (last !== undefined && this.lastLength[field] === n) {
      let j = 0;
      while (j < n && last[j] === bytes[pos + j]) j++;
      if (j === n) return this.lastText[field];
    }
    const text = stringAt(bytes, pos);
    if (last === undefined || last.length < n) last = this.lastBytes[field] = new Uint8Array(Math.max(64, n));
    for (let j = 0; j < n; j++) last[j] = bytes[pos + j] as number;
    this.lastLength[field] = n;
    this.lastText[field] = text;
    return text;
  }

  read(bytes: Uint8Array, pos: number, end: number, decode: (bytes: Uint8Array) => unknown): unknown {
    const key = latin1Slice.call(bytes, pos, end);
    const known = this.values.get(key);
    if (known !== undefined) return known;
    const value = decode(bytes.subarray(pos, end));
    if (this.values.size >= this.limit) this.values.clear();
    if (value !== undefined) this.values.set(key, value);
    return value;
  }

  clear(): void {
    this.values.clear();
    this.lastBytes.length = 0;
    this.lastLength.length = 0;
    this.lastText.length = 0;
  }
}

/** The same, with the fields' positions already found (`at`, -1: absent). */
export function readFields(
  bytes: Uint8Array,
  names: readonly string[],
  at: Int32Array,
  decode: (bytes: Uint8Array) => unknown,
  positionOnly?: readonly boolean[],
  memo?: ValueMemo,
): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < names.length; i++) {
    const pos = at[i] as number;
    if (pos === -1 || positionOnly?.[i]) continue;
    const t = bytes[pos] as number;
    let value: unknown;
    if ((t >= 0xa0 && t <= 0xbf) || t === 0xd9 || t === 0xda) value = memo === undefined ? stringAt(bytes, pos) : memo.text(i, bytes, pos);
    else if (t === 0xc2 || t === 0xc3) value = t === 0xc3;
    else if (t === 0x90) value = NO_ITEMS;
    else if (t === 0xc0) value = null;
    else {
      const end = skip(bytes, pos);
      if (end > bytes.length) return undefined;
      value = memo === undefined ? decode(bytes.subarray(pos, end)) : memo.read(bytes, pos, end, decode);
    }
    out[names[i] as string] = value;
  }
  return out;
}
