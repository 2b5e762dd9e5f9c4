/** What the main thread and a scan's worker thread (scan-worker.ts) say to each other. */

/** The worker's data: where to read, the table, its positional fields, and which fields' value starts to send. */
export interface ScanRequest {
  dir: string;
  gte: string;
  lt: string;
  /** The table (its declaration says the worker how to key each record as the main thread's loader would). */
  table: 'tokens';
  /** Which chunks the worker keys: `auto`, those made while the main thread has chunks waiting (tests force the others). */
  keying: ScanKeying;
  /** The positional form's fields, in order. */
  fields: readonly string[];
  /** Positions (in `fields`) of the fields whose value starts each record is sent with. */
  wanted: readonly number[];
  /** An Int32Array over it: [IN_FLIGHT, STOP]. */
  control: SharedArrayBuffer;
}

export type ScanKeying = 'auto' | 'always' | 'never';

/** Records in the positional form, packed: record i ends at `ends[i]` (starts at `ends[i - 1]`, or 0). */
export interface ScanChunk {
  kind: 'chunk';
  /** Whether the worker keyed the records (`keys`, `keyEnds`, `newKeys`, `times`); else the main thread reads their keys. */
  keyed: boolean;
  bytes: Uint8Array;
  ends: Uint32Array;
  /** For record i, the value starts of the wanted fields at `starts[i * wanted.length + j]` (-1: absent). */
  starts: Int32Array;
  /**
   * Record i's keys of the table's non-unique indexes, as numbers: `keys[keyEnds[i - 1] .. keyEnds[i]]`.
   * A number stands for one key of one index, the same in every chunk of the scan; the keys first
   * named in this chunk are in `newKeys` (index number, key), numbered on from the last chunk's.
   */
  keys: Int32Array;
  keyEnds: Uint32Array;
  newKeys: Array<number | string>;
  /** Record i's place in the time order (its expiry, in ms), NaN when it has none. */
  times: Float64Array;
}

export type ScanMessage =
  | ScanChunk
  | { kind: 'fallback'; why: string }
  | { kind: 'done'; records: number }
  /** The worker's LevelDB is closed (always its last message); `error` when its scan failed. */
  | { kind: 'closed'; error?: string };

/** Chunks sent and not yet taken by the main thread (the worker waits at 4). */
export const IN_FLIGHT = 0;
/** Set by the main thread: stop reading. */
export const STOP = 1;
/** A chunk's bytes (a record larger than this travels alone). */
export const CHUNK_BYTES = 4 * 1024 * 1024;
/** At most this many records a chunk. */
export const CHUNK_RECORDS = 32 * 1024;
