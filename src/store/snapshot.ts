import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { z } from 'zod';
import type { BootstrapState } from '../domain/types.js';
import { bootstrapStateSchema, decodeRaw, encode } from './records.js';
import type { RecordList } from './table.js';
import { type RecordTypes, type RecordsByTable, TABLES, TABLE_NAMES, type TableName, emptyRecords } from './schema.js';

/**
 * The snapshot file (GET/PUT /v1/snapshot, `watchword snapshot`):
 *
 *   "WWSNAP\r\n"                       8 bytes of magic
 *   frames                            each a 4-byte big-endian length, then msgpack:
 *     1 header                        { FormatVersion, Datacenter, Primary, Index, LogID, CreatedAt, Counts }
 *     n records                       { T: <table> | "bootstrap", V: record }, tables in TABLE_NAMES order
 *     1 end                           { T: "end", Records: n }
 *   SHA-256 of every byte before it   32 bytes
 *
 * A file is read as a stream (SnapshotDecoder): each frame checked as it completes, the
 * checksum and counts at the end; a restore stages what it reads and makes it current only
 * once the whole file has passed.
 */
export const SNAPSHOT_MAGIC = Buffer.from('WWSNAP\r\n', 'latin1');
export const SNAPSHOT_FORMAT = 1;

export const snapshotHeaderSchema = z.strictObject({
  FormatVersion: z.number().int(),
  /** Datacenter the snapshot was taken in (its Local tokens belong there). */
  Datacenter: z.string(),
  /** Whether that datacenter was the primary. */
  Primary: z.boolean(),
  /** Index of the datacenter's state the snapshot shows. */
  Index: z.number().int().nonnegative(),
  /** Change-log identity of that datacenter at the time. */
  LogID: z.string(),
  /** RFC 3339. */
  CreatedAt: z.string(),
  /** Records per table (`Tokens`, `Policies`, …; a table newer than the file is absent), and the Local tokens among them. */
  Counts: z.strictObject({
    ...(Object.fromEntries(TABLE_NAMES.map((t) => [countKey(t), z.number().int().nonnegative().optional()])) as {
      [T in TableName as Capitalize<T>]: z.ZodOptional<z.ZodNumber>;
    }),
    LocalTokens: z.number().int().nonnegative(),
  }),
});

/** A table's name in the header's counts: `authMethods` -> `AuthMethods`. */
function countKey<T extends TableName>(t: T): Capitalize<T> {
  return `${t.charAt(0).toUpperCase()}${t.slice(1)}` as Capitalize<T>;
}

export type SnapshotHeader = z.infer<typeof snapshotHeaderSchema>;

/** A record of table `T` in the file. */
export type TableRecordFrame<T extends TableName = TableName> = { [K in T]: { T: K; V: RecordTypes[K] } }[T];

// One kind of record frame per table (from the table list), the bootstrap state, the end.
const frames = [
  ...TABLE_NAMES.map((t) => z.strictObject({ T: z.literal(t), V: TABLES[t].schema })),
  z.strictObject({ T: z.literal('bootstrap'), V: bootstrapStateSchema }),
  z.strictObject({ T: z.literal('end'), Records: z.number().int().nonnegative() }),
];
const recordFrame = z.discriminatedUnion(
  'T',
  frames as [(typeof frames)[number], ...Array<(typeof frames)[number]>],
) as unknown as z.ZodType<TableRecordFrame | { T: 'bootstrap'; V: BootstrapState } | { T: 'end'; Records: number }>;

/** What a snapshot holds, decoded: its header, one array per table, the bootstrap state. */
export type SnapshotContent = RecordsByTable & { header: SnapshotHeader; bootstrap: BootstrapState | null };

/** Everything a snapshot is taken from: a consistent view of one moment. */
export type SnapshotSource = { readonly [T in TableName]: RecordList<RecordTypes[T]> } & {
  datacenter: string;
  primary: boolean;
  index: number;
  logID: string;
  bootstrap: BootstrapState | null;
  /** How many of `tokens` are Local (counted from them when not given). */
  localTokens?: number;
};

/** Records in slices of a few hundred: a compact table's list is decoded a slice at a time. */
function* inSlices<R>(list: RecordList<R>): Generator<R> {
  for (let i = 0; i < list.length; i += 500) yield* list.slice(i, i + 500);
}

/** One list after another, read a slice at a time. */
export function concatLists<R>(a: RecordList<R>, b: RecordList<R>): RecordList<R> {
  return {
    length: a.length + b.length,
    slice: (start, end) => [
      ...a.slice(start, Math.min(end, a.length)),
      ...b.slice(Math.max(0, start - a.length), Math.max(0, end - a.length)),
    ],
  };
}

function addRecord<T extends TableName>(content: RecordsByTable, r: TableRecordFrame<T>): void {
  const list: Array<RecordTypes[T]> = content[r.T];
  list.push(r.V);
}

export class SnapshotError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SnapshotError';
  }
}

function frame(value: unknown): Buffer {
  const body = encode(value);
  const out = Buffer.allocUnsafe(4 + body.length);
  out.writeUInt32BE(body.length, 0);
  out.set(body, 4);
  return out;
}

/**
 * The snapshot as a stream of chunks, hashed as it goes. Records are produced a few
 * hundred at a time so a large snapshot never sits in memory twice and the event loop
 * keeps serving between chunks.
 */
export function snapshotStream(source: SnapshotSource, now: Date): Readable {
  const hash = createHash('sha256');
  const header: SnapshotHeader = {
    FormatVersion: SNAPSHOT_FORMAT,
    Datacenter: source.datacenter,
    Primary: source.primary,
    Index: source.index,
    LogID: source.logID,
    CreatedAt: now.toISOString(),
    Counts: {
      ...(Object.fromEntries(TABLE_NAMES.map((t) => [countKey(t), source[t].length])) as Record<Capitalize<TableName>, number>),
      LocalTokens: source.localTokens ?? [...inSlices(source.tokens)].filter((t) => t.Local).length,
    },
  };
  function* chunks(): Generator<Buffer> {
    const parts: Buffer[] = [SNAPSHOT_MAGIC, frame(header)];
    let records = 0;
    const flush = function* (force: boolean): Generator<Buffer> {
      if (parts.length === 0 || (!force && parts.length < 500)) return;
      const chunk = Buffer.concat(parts);
      parts.length = 0;
      hash.update(chunk);
      yield chunk;
    };
    for (const T of TABLE_NAMES) {
      for (const V of inSlices<RecordTypes[typeof T]>(source[T])) {
        parts.push(frame({ T, V }));
        records++;
        yield* flush(false);
      }
    }
    if (source.bootstrap) {
      parts.push(frame({ T: 'bootstrap', V: source.bootstrap }));
      records++;
    }
    parts.push(frame({ T: 'end', Records: records }));
    yield* flush(true);
    yield hash.digest();
  }
  return Readable.from(chunks(), { objectMode: false });
}

/** What a snapshot's bytes hold, in order: its header, then each record (a table's, or the bootstrap state). */
export type SnapshotItem =
  | { kind: 'header'; header: SnapshotHeader }
  | { kind: 'record'; record: TableRecordFrame }
  | { kind: 'bootstrap'; bootstrap: BootstrapState };

/**
 * Reads a snapshot as its bytes arrive, checking each frame as it completes: the magic, the
 * header (its version), every record's shape, the end frame's count, the header's counts,
 * and, once the bytes end, the checksum of everything before it. Nothing is held but the
 * frame being read and the counts: a file of any size is read in the memory of one frame.
 * Items come out before the checksum is known: a reader that acts on them must be able to
 * take them back (a restore stages them, and gives the staging up if `end` throws).
 */
/** The largest frame a snapshot holds: a record is at most a request body (1 MiB) and some fields around it. */
const MAX_FRAME_BYTES = 16 << 20;

export class SnapshotDecoder {
  private readonly hash = createHash('sha256');
  /** Bytes seen but not yet hashed: the last 32 may be the checksum. */
  private tail: Buffer = Buffer.alloc(0);
  /**
   * Hashed bytes not yet parsed (a frame not complete yet), as the chunks they came in: joined
   * once, when enough have come for the next frame, so a large frame costs one copy, not one per chunk.
   */
  private chunks: Buffer[] = [];
  private chunked = 0;
  /** Bytes needed before parsing again: a length prefix, or the frame it announced. */
  private need = SNAPSHOT_MAGIC.length;
  private magicSeen = false;
  private header: SnapshotHeader | undefined;
  private records = 0;
  private ended = false;
  private localTokens = 0;
  private readonly counts = new Map<TableName, number>();

  /** More of the file's bytes; returns the items they complete. */
  push(bytes: Buffer): SnapshotItem[] {
    const all = this.tail.length === 0 ? bytes : Buffer.concat([this.tail, bytes]);
    const body = all.length > 32 ? all.subarray(0, all.length - 32) : Buffer.alloc(0);
    this.tail = Buffer.from(all.subarray(body.length));
    if (body.length === 0) return [];
    this.hash.update(body);
    this.chunks.push(body);
    this.chunked += body.length;
    const out: SnapshotItem[] = [];
    if (this.chunked < this.need) return out;
    let pending = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.chunked);
    if (!this.magicSeen) {
      if (!pending.subarray(0, SNAPSHOT_MAGIC.length).equals(SNAPSHOT_MAGIC))
        throw new SnapshotError('not a watchword snapshot (the file does not start with the snapshot magic)');
      this.magicSeen = true;
      pending = pending.subarray(SNAPSHOT_MAGIC.length);
    }
    let at = 0;
    this.need = 4;
    while (at + 4 <= pending.length) {
      const len = pending.readUInt32BE(at);
      if (len > MAX_FRAME_BYTES) throw new SnapshotError(`a frame of ${len} bytes is larger than any record (at most ${MAX_FRAME_BYTES})`);
      if (at + 4 + len > pending.length) {
        this.need = 4 + len;
        break;
      }
      const item = this.frame(pending.subarray(at + 4, at + 4 + len));
      at += 4 + len;
      if (item) out.push(item);
    }
    // The rest is copied out, so the chunk it came from is not kept alive by it.
    const rest = Buffer.from(pending.subarray(at));
    this.chunks = rest.length > 0 ? [rest] : [];
    this.chunked = rest.length;
    return out;
  }

  private frame(bytes: Buffer): SnapshotItem | undefined {
    const what = this.header === undefined ? 'the header' : `record ${this.records + 1}`;
    if (this.ended) throw new SnapshotError('bytes after the end of the snapshot');
    let raw: unknown;
    try {
      raw = decodeRaw(bytes);
    } catch (err) {
      throw new SnapshotError(`${what} is not valid msgpack: ${(err as Error).message}`);
    }
    if (this.header === undefined) {
      const head = snapshotHeaderSchema.safeParse(raw);
      if (!head.success) {
        const version = (raw as { FormatVersion?: unknown } | null)?.FormatVersion;
        if (typeof version === 'number' && version > SNAPSHOT_FORMAT)
          throw new SnapshotError(`snapshot format ${version} is newer than this build reads (${SNAPSHOT_FORMAT})`);
        throw new SnapshotError(`the header is malformed: ${head.error.issues[0]?.message ?? 'unknown problem'}`);
      }
      if (head.data.FormatVersion !== SNAPSHOT_FORMAT)
        throw new SnapshotError(`snapshot format ${head.data.FormatVersion} is not one this build reads (${SNAPSHOT_FORMAT})`);
      this.header = head.data;
      return { kind: 'header', header: head.data };
    }
    const parsed = recordFrame.safeParse(raw);
    if (!parsed.success)
      throw new SnapshotError(
        `${what} is malformed: ${parsed.error.issues[0]?.message ?? 'unknown problem'} at ${parsed.error.issues[0]?.path.join('.') ?? ''}`,
      );
    const r = parsed.data;
    if (r.T === 'end') {
      if (r.Records !== this.records) throw new SnapshotError(`the end says ${r.Records} records, the file holds ${this.records}`);
      this.ended = true;
      return undefined;
    }
    this.records++;
    if (r.T === 'bootstrap') return { kind: 'bootstrap', bootstrap: r.V };
    this.counts.set(r.T, (this.counts.get(r.T) ?? 0) + 1);
    if (r.T === 'tokens' && r.V.Local) this.localTokens++;
    return { kind: 'record', record: r };
  }

  /** The bytes have ended: the checksum, the end frame and the header's counts are checked. */
  end(): SnapshotHeader {
    if (!this.magicSeen && this.chunked + this.tail.length < SNAPSHOT_MAGIC.length + 32)
      throw new SnapshotError('not a watchword snapshot (the file does not start with the snapshot magic)');
    if (this.tail.length < 32 || !this.hash.digest().equals(this.tail))
      throw new SnapshotError('checksum mismatch: the file is damaged or truncated');
    if (this.header === undefined) throw new SnapshotError('truncated: the header missing');
    if (this.chunked > 0 || !this.ended)
      throw new SnapshotError(this.ended ? 'bytes after the end of the snapshot' : 'truncated: the end is missing');
    const c = this.header.Counts;
    if (c.LocalTokens !== this.localTokens || TABLE_NAMES.some((t) => (c[countKey(t)] ?? 0) !== (this.counts.get(t) ?? 0))) {
      throw new SnapshotError('the header counts do not match the records');
    }
    return this.header;
  }
}

/** A snapshot file's items, read in chunks; the checks of `SnapshotDecoder.end` run once it has been read. */
export async function* readSnapshotFile(path: string): AsyncGenerator<SnapshotItem, SnapshotHeader> {
  const decoder = new SnapshotDecoder();
  for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) yield* decoder.push(chunk as Buffer);
  return decoder.end();
}

/**
 * Whether a snapshot file's last 32 bytes are the SHA-256 of the rest (read as a stream). A
 * restore that met a bad record asks this: a damaged file is then named as damaged.
 */
export async function snapshotChecksumMatches(path: string): Promise<boolean> {
  const hash = createHash('sha256');
  let tail = Buffer.alloc(0);
  for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) {
    const all = Buffer.concat([tail, chunk as Buffer]);
    const body = all.subarray(0, Math.max(0, all.length - 32));
    hash.update(body);
    tail = Buffer.from(all.subarray(body.length));
  }
  return tail.length === 32 && hash.digest().equals(tail);
}

/** Reads and verifies a whole snapshot held in memory; throws SnapshotError naming what is wrong. */
export function readSnapshot(file: Buffer): SnapshotContent {
  const decoder = new SnapshotDecoder();
  const items = decoder.push(file);
  const header = decoder.end();
  const content: SnapshotContent = { header, ...emptyRecords(), bootstrap: null };
  for (const item of items) {
    if (item.kind === 'bootstrap') content.bootstrap = item.bootstrap;
    else if (item.kind === 'record') addRecord(content, item.record);
  }
  return content;
}
