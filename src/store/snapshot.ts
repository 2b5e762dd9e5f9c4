import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { z } from 'zod';
import type { BootstrapState } from '../domain/types.js';
import { bootstrapStateSchema, decodeRaw, encode } from './records.js';
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
 * A file is verified whole (checksum, version, every frame's shape and the counts)
 * before anything is restored from it.
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
type TableRecordFrame<T extends TableName = TableName> = { [K in T]: { T: K; V: RecordTypes[K] } }[T];

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
export type SnapshotSource = { readonly [T in TableName]: readonly RecordTypes[T][] } & {
  datacenter: string;
  primary: boolean;
  index: number;
  logID: string;
  bootstrap: BootstrapState | null;
};

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
      LocalTokens: source.tokens.filter((t) => t.Local).length,
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
      for (const V of source[T]) {
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

/** Reads and verifies a whole snapshot file; throws SnapshotError naming what is wrong. */
export function readSnapshot(file: Buffer): SnapshotContent {
  if (file.length < SNAPSHOT_MAGIC.length + 32 || !file.subarray(0, SNAPSHOT_MAGIC.length).equals(SNAPSHOT_MAGIC)) {
    throw new SnapshotError('not a watchword snapshot (the file does not start with the snapshot magic)');
  }
  const body = file.subarray(0, file.length - 32);
  const sum = createHash('sha256').update(body).digest();
  if (!sum.equals(file.subarray(file.length - 32))) throw new SnapshotError('checksum mismatch: the file is damaged or truncated');
  let at = SNAPSHOT_MAGIC.length;
  const next = (what: string): unknown => {
    if (at + 4 > body.length) throw new SnapshotError(`truncated: ${what} missing`);
    const len = body.readUInt32BE(at);
    if (at + 4 + len > body.length) throw new SnapshotError(`truncated inside ${what}`);
    const bytes = body.subarray(at + 4, at + 4 + len);
    at += 4 + len;
    try {
      return decodeRaw(bytes);
    } catch (err) {
      throw new SnapshotError(`${what} is not valid msgpack: ${(err as Error).message}`);
    }
  };
  const rawHeader = next('the header');
  const head = snapshotHeaderSchema.safeParse(rawHeader);
  if (!head.success) {
    const version = (rawHeader as { FormatVersion?: unknown } | null)?.FormatVersion;
    if (typeof version === 'number' && version > SNAPSHOT_FORMAT)
      throw new SnapshotError(`snapshot format ${version} is newer than this build reads (${SNAPSHOT_FORMAT})`);
    throw new SnapshotError(`the header is malformed: ${head.error.issues[0]?.message ?? 'unknown problem'}`);
  }
  if (head.data.FormatVersion !== SNAPSHOT_FORMAT)
    throw new SnapshotError(`snapshot format ${head.data.FormatVersion} is not one this build reads (${SNAPSHOT_FORMAT})`);
  const content: SnapshotContent = { header: head.data, ...emptyRecords(), bootstrap: null };
  let records = 0;
  for (;;) {
    const parsed = recordFrame.safeParse(next(`record ${records + 1}`));
    if (!parsed.success)
      throw new SnapshotError(
        `record ${records + 1} is malformed: ${parsed.error.issues[0]?.message ?? 'unknown problem'} at ${parsed.error.issues[0]?.path.join('.') ?? ''}`,
      );
    const r = parsed.data;
    if (r.T === 'end') {
      if (r.Records !== records) throw new SnapshotError(`the end says ${r.Records} records, the file holds ${records}`);
      break;
    }
    records++;
    if (r.T === 'bootstrap') content.bootstrap = r.V;
    else addRecord(content, r);
  }
  if (at !== body.length) throw new SnapshotError('bytes after the end of the snapshot');
  const c = head.data.Counts;
  const local = content.tokens.filter((t) => t.Local).length;
  if (c.LocalTokens !== local || TABLE_NAMES.some((t) => (c[countKey(t)] ?? 0) !== content[t].length)) {
    throw new SnapshotError('the header counts do not match the records');
  }
  return content;
}
