import type { DumpPart, TableDumpMeta } from './compact/dump.js';
import type { TableDef } from './schema.js';

/**
 * What the store and its readers use of one table in memory, however it holds its records:
 * `MemTable` keeps each as an object (the few policies, roles, auth methods and rules), and
 * `CompactTable` keeps each as its encoded bytes (tokens: millions of them). Records handed
 * out are shared and never mutated: a change replaces the record.
 */
/** Records read a slice at a time (an array is one; a compact table's capture decodes each slice on demand). */
export interface RecordList<R> {
  readonly length: number;
  slice(start: number, end: number): R[];
}

export interface Table<R, I extends string> {
  readonly def: TableDef<R, I>;
  readonly size: number;
  get(id: string): R | undefined;
  /** Whether a record of this ID is held (nothing decoded). */
  has(id: string): boolean;
  /** The record, without keeping it decoded (one about to be deleted: it must not push the tokens in use out of the cache). */
  peek(id: string): R | undefined;
  /** The ID a unique index maps `key` to. */
  uniqueID(index: I, key: string): string | undefined;
  byUnique(index: I, key: string): R | undefined;
  /** Records a non-unique index holds under `key`, in no particular order. */
  members(index: I, key: string): Iterable<R>;
  /** Whether the record of this ID is among those a non-unique index holds under `key` (nothing decoded); undefined when none of this ID is held. */
  isMember(index: I, key: string, id: string): boolean | undefined;
  /** How many records a non-unique index holds under `key`. */
  memberCount(index: I, key: string): number;
  /** The same records in ID order (kept until one of them changes: lists of one filter need no sort per request). */
  sortedMembers(index: I, key: string): Iterable<R>;
  /** The same records in ID order from the first whose ID sorts after `after` (a binary search: a page costs its own length), not kept decoded. */
  sortedMembersAfter(index: I, key: string, after: string | undefined): Iterable<R>;
  /** The IDs of the records a non-unique index holds under `key`, in no particular order (nothing decoded). */
  memberIDs(index: I, key: string): string[];
  /** Every key a non-unique index holds. */
  indexKeys(index: I): IterableIterator<string>;
  /** Every record, in no particular order. */
  values(): IterableIterator<R>;
  /**
   * The records that enter the change log (`def.isGlobal`), as they are now and unchanged by
   * later writes, for a snapshot; a compact table decodes them a slice at a time.
   */
  globalRecords(): RecordList<R>;
  /**
   * Adds or replaces a record (the one way in once a table is loaded); answers the version it
   * replaced. `bytes`: its encoded form, already made for its write to disk (a table that keeps
   * bytes keeps these, no encoding again); `loading`: known new, at a start or in a staged
   * store, and the ordered index is sorted later (finishLoading).
   */
  put(record: R, options?: { bytes?: Uint8Array; loading?: boolean }): R | undefined;
  /**
   * A record as stored on disk, read at a start: decoded and checked as the table needs it.
   * False when it is not a well-formed record of the table (the start fails, naming it).
   */
  loadStored(bytes: Uint8Array): boolean;
  /** The compact form's other way in at a start (a checkpoint), when the table keeps it. */
  readonly compact?: CompactLoader;
  /** A table that keeps bytes: those of replaced and deleted records not yet reclaimed, and how often they were. */
  readonly memory?: { garbageBytes: number; compactions: number };
  /** Deletes by ID; `old`, when the caller holds the record being deleted (not decoded again). */
  delete(id: string, old?: R): R | undefined;
  /**
   * Deletes by ID without decoding the record when the table keeps bytes: its index keys read
   * from them (the reaper's bulk deletes). Answers at least the fields of `answer` (indexed
   * fields), undefined when none of this ID is held; `time`, where the ordered index holds it
   * (the reaper found it there), spares reading its time.
   */
  deleteUnread(id: string, answer?: readonly string[], time?: number): Partial<R> | undefined;
  /** After loading: puts the ordered index in order. */
  finishLoading(): void;
  /** Entries ordered at or before `until`, after the cursor `after` ([time, id]), at most `limit`. */
  orderedUpTo(until: number, limit: number, after?: [number, string]): Array<[number, string]>;
  /** How many records are ordered after `from` and at or before `until` (a walk of the times between, not of the records). */
  orderedCountBetween(from: number, until: number): number;
  firstOrdered(): number | undefined;
}

/** Any table, for code generic over the table list. */
export type AnyTable = Table<unknown, string>;

export const byID = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * What a start may do with a compact table besides reading each stored record (`loadStored`):
 * take a checkpoint's dump whole (checkpoint.ts). A table that is not compact has none of this.
 */
export interface CompactLoader {
  /** Every field of a record, in the positional form's order. */
  readonly fields: readonly string[];
  readonly size: number;
  /** Room in the ID tables for `records` while the table is empty. */
  reserve(records: number): void;
  /** The table as a checkpoint keeps it. */
  dump(): { meta: TableDumpMeta; parts: DumpPart[] };
  /** Takes a checkpoint's dump, read back. */
  restore(meta: TableDumpMeta, parts: readonly Buffer[]): void;
  finishLoading(): void;
}
