/**
 * A canonical lower-case UUID as the four 32-bit words an ID table keys it by (compact/id-table.ts),
 * from its text or from its bytes where a stored record holds it.
 */

/** The value of a hex digit's char code, or -1. */
const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[97 + i] = 10 + i;

/**
 * The byte two hex digits make, indexed by their char codes (first << 8 | second), or -1: a
 * UUID is read a pair of digits at a time, half the lookups and shifts of one at a time.
 */
const PAIR = new Int16Array(65536).fill(-1);
for (let a = 0; a < 128; a++)
  for (let b = 0; b < 128; b++)
    if ((HEX[a] as number) >= 0 && (HEX[b] as number) >= 0) PAIR[(a << 8) | b] = ((HEX[a] as number) << 4) | (HEX[b] as number);

/** Where each pair of the 32 hex digits of an 8-4-4-4-12 UUID starts in its 36 characters, four pairs a word. */
const PAIRS = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/**
 * The four words of a canonical lower-case UUID (dashes at 8, 13, 18, 23), written to `out`;
 * false for anything else. Keys compare exactly, as strings do: an upper-case UUID is another
 * key, kept as its string (generated IDs are lower case, so that is rare).
 */
export function uuidWords(id: string, out: Uint32Array): boolean {
  if (id.length !== 36 || id.charCodeAt(8) !== 45 || id.charCodeAt(13) !== 45 || id.charCodeAt(18) !== 45 || id.charCodeAt(23) !== 45)
    return false;
  let bad = 0;
  for (let w = 0; w < 4; w++) {
    let v = 0;
    for (let p = w * 4; p < w * 4 + 4; p++) {
      const at = PAIRS[p] as number;
      const hi = id.charCodeAt(at);
      const lo = id.charCodeAt(at + 1);
      // A char code past 0xff would reach another pair's entry: it is no hex digit anyway.
      const x = (hi | lo) > 0xff ? -1 : (PAIR[(hi << 8) | lo] as number);
      bad |= x;
      v = (v << 8) | (x & 0xff);
    }
    out[w] = v >>> 0;
  }
  return bad >= 0;
}

/**
 * The same from the 36 bytes of a UTF-8 string at `start` of `bytes` (a record's stored form),
 * so a load need not make a string of every ID.
 */
export function uuidWordsAt(bytes: Uint8Array, start: number, out: Uint32Array): boolean {
  if (
    start + 36 > bytes.length ||
    bytes[start + 8] !== 45 ||
    bytes[start + 13] !== 45 ||
    bytes[start + 18] !== 45 ||
    bytes[start + 23] !== 45
  )
    return false;
  let bad = 0;
  for (let w = 0; w < 4; w++) {
    let v = 0;
    for (let p = w * 4; p < w * 4 + 4; p++) {
      const at = start + (PAIRS[p] as number);
      const x = PAIR[((bytes[at] as number) << 8) | (bytes[at + 1] as number)] as number;
      bad |= x;
      v = (v << 8) | (x & 0xff);
    }
    out[w] = v >>> 0;
  }
  return bad >= 0;
}
