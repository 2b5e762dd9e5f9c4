import { encode } from './records.js';
import type { LogEntry } from './store.js';

/**
 * Change-log entries in msgpack, written in the same batch as the records they carry:
 * each record's bytes (already made for its own key) embedded, not encoded again.
 */

const KEYS = {
  Index: encode('Index'),
  Changes: encode('Changes'),
  Table: encode('Table'),
  Op: encode('Op'),
  ID: encode('ID'),
  Value: encode('Value'),
};

function arrayHeader(n: number): Uint8Array {
  if (n < 16) return Uint8Array.of(0x90 | n);
  if (n < 0x10000) return Uint8Array.of(0xdc, n >> 8, n & 0xff);
  return Uint8Array.of(0xdd, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
}

/**
 * A change-log entry in msgpack, decoding to what `encode(entry)` would, but with each
 * record's encoding (already made for its own key) embedded rather than made again.
 */
export function encodeLogEntry(entry: LogEntry, encoded: ReadonlyMap<unknown, Uint8Array>): Uint8Array {
  const parts: Uint8Array[] = [Uint8Array.of(0x82), KEYS.Index, encode(entry.Index), KEYS.Changes, arrayHeader(entry.Changes.length)];
  for (const c of entry.Changes) {
    const value = c.Op === 'set' ? (encoded.get(c.Value) ?? encode(c.Value)) : c.Op === 'expire' ? encode(c.Value) : undefined;
    parts.push(Uint8Array.of(value ? 0x84 : 0x83), KEYS.Table, encode(c.Table), KEYS.Op, encode(c.Op), KEYS.ID, encode(c.ID));
    if (value) parts.push(KEYS.Value, value);
  }
  return Buffer.concat(parts);
}
