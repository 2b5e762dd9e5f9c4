import { createHash } from 'node:crypto';
import { type FileHandle, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A start without a scan of the tokens. At a clean close the store writes the tokens' records
 * as its compact table holds them (positional, field names said once) to one file in the
 * store's directory; the next open reads that file instead of LevelDB's tokens, so a restart
 * costs reading those bytes and rebuilding the indexes, not decoding every stored map.
 *
 * The file is trusted only for the LevelDB files it was written beside: it names every file in
 * the directory with its size, taken after LevelDB closed. Anything that opens LevelDB again
 * (this store, a tool, a copy restored into the directory) starts a new log file, so the
 * listing no longer matches and the open scans LevelDB as it always did. The open removes the
 * file once read: a crash leaves no checkpoint behind. A file that does not end in the SHA-256
 * of what it holds, or names other fields, is set aside the same way.
 */

const FILE = 'tokens.checkpoint';
const MAGIC = Buffer.from('watchword tokens checkpoint 1\n');
const DIGEST = 32;
const BLOCK = 16 * 1024 * 1024;

interface Header {
  /** The LevelDB files it was written beside: name, size; sorted by name. */
  listing: Array<[string, number]>;
  /** The fields of the positional records, in order. */
  fields: string[];
  records: number;
}

/** The directory's files other than a checkpoint's, with their sizes, sorted by name. */
async function listing(dir: string): Promise<Array<[string, number]>> {
  const names = (await readdir(dir)).filter((n) => !n.startsWith(FILE)).sort();
  return Promise.all(names.map(async (n): Promise<[string, number]> => [n, (await stat(join(dir, n))).size]));
}

/** What a checkpoint's records are read into (a compact table). */
export interface CheckpointTarget {
  /** The fields of its positional records, in order: a checkpoint of other fields is set aside. */
  readonly fields: readonly string[];
  /** Told how many records follow. */
  reserve(records: number): void;
  /** Takes a record's bytes as the table held them; false when they are not a well-formed record. */
  loadEncoded(bytes: Uint8Array): boolean;
}

/** What a checkpoint in `dir` (if any) is good for: a reason it is not, or how to read it. */
export type Checkpoint =
  | { usable: false; why: string }
  | {
      usable: true;
      /** Reads the records into `into`; a reason when the checkpoint does not hold (what `into` took is then to be dropped). */
      load: (into: CheckpointTarget) => Promise<string | undefined>;
    };

/**
 * Writes the checkpoint of `records` (their count given) to `dir`, whose LevelDB is closed.
 * `sync`: flushed to the disk before it is named.
 */
export async function writeCheckpoint(
  dir: string,
  fields: readonly string[],
  records: Iterable<Uint8Array>,
  count: number,
  sync: boolean,
): Promise<void> {
  const header: Header = {
    listing: await listing(dir),
    fields: [...fields],
    records: count,
  };
  const json = Buffer.from(JSON.stringify(header));
  const tmp = join(dir, `${FILE}.tmp`);
  const file = await open(tmp, 'w', 0o600);
  const hash = createHash('sha256');
  try {
    let buf = Buffer.allocUnsafeSlow(BLOCK);
    let at = 0;
    const flush = async () => {
      hash.update(buf.subarray(0, at));
      await writeAll(file, buf.subarray(0, at));
      at = 0;
    };
    const put = async (bytes: Uint8Array) => {
      if (at + bytes.length > buf.length) await flush();
      if (bytes.length > buf.length) buf = Buffer.allocUnsafeSlow(bytes.length * 2);
      buf.set(bytes, at);
      at += bytes.length;
    };
    const len = Buffer.alloc(4);
    len.writeUInt32BE(json.length);
    await put(MAGIC);
    await put(len);
    await put(json);
    let written = 0;
    for (const r of records) {
      if (at + 4 > buf.length) await flush();
      buf.writeUInt32BE(r.length, at);
      at += 4;
      await put(r);
      written++;
    }
    if (written !== count) throw new Error(`a checkpoint of ${count} records found ${written}`);
    await flush();
    await writeAll(file, hash.digest());
    if (sync) await file.sync();
  } catch (err) {
    await file.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await file.close();
  await rename(tmp, join(dir, FILE));
  if (sync) {
    const d = await open(dir, 'r');
    await d.sync().finally(() => d.close());
  }
}

async function writeAll(file: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length; ) done += (await file.write(bytes, done, bytes.length - done)).bytesWritten;
}

/** The checkpoint in `dir`, judged before LevelDB opens there (an open changes the listing). */
export async function findCheckpoint(dir: string): Promise<Checkpoint> {
  const path = join(dir, FILE);
  let file: FileHandle;
  try {
    file = await open(path, 'r');
  } catch {
    return { usable: false, why: 'none written' };
  }
  let header: Header;
  let bodyStart: number;
  let size: number;
  try {
    size = (await file.stat()).size;
    const head = Buffer.alloc(MAGIC.length + 4);
    await file.read(head, 0, head.length, 0);
    if (!head.subarray(0, MAGIC.length).equals(MAGIC)) return closed(file, 'not a checkpoint of this format');
    const jsonLength = head.readUInt32BE(MAGIC.length);
    if (head.length + jsonLength + DIGEST > size) return closed(file, 'cut short');
    const json = Buffer.alloc(jsonLength);
    await file.read(json, 0, jsonLength, head.length);
    header = JSON.parse(json.toString('utf8')) as Header;
    bodyStart = head.length + jsonLength;
  } catch (err) {
    return closed(file, `unreadable: ${(err as Error).message}`);
  }
  if (JSON.stringify(header.listing) !== JSON.stringify(await listing(dir))) return closed(file, 'the store changed since it was written');
  return {
    usable: true,
    load: async (into) => {
      try {
        if (JSON.stringify(header.fields) !== JSON.stringify(into.fields)) return 'written for other fields';
        into.reserve(header.records);
        return await readRecords(file, header.records, bodyStart, size - DIGEST, (bytes) => into.loadEncoded(bytes));
      } finally {
        await file.close();
      }
    },
  };
}

async function closed(file: FileHandle, why: string): Promise<Checkpoint> {
  await file.close();
  return { usable: false, why };
}

/** Removes the checkpoint (and an unfinished one) from `dir`. */
export async function removeCheckpoint(dir: string): Promise<void> {
  await rm(join(dir, FILE), { force: true });
  await rm(join(dir, `${FILE}.tmp`), { force: true });
}

/**
 * Hands each record of the body (`start` to `end`) to `take`, and checks the digest after
 * it; a reason when anything does not hold (the caller then scans LevelDB instead).
 */
async function readRecords(
  file: FileHandle,
  records: number,
  start: number,
  end: number,
  take: (bytes: Uint8Array) => boolean,
): Promise<string | undefined> {
  const hash = createHash('sha256');
  const head = Buffer.alloc(start);
  await file.read(head, 0, start, 0);
  hash.update(head);
  let block = Buffer.allocUnsafeSlow(BLOCK);
  let filled = 0;
  let pos = start;
  let taken = 0;
  let at = 0;
  for (;;) {
    // Whole records in the block are taken; a record cut by its end moves to the front.
    for (;;) {
      if (at + 4 > filled) break;
      const length = block.readUInt32BE(at);
      if (at + 4 + length > filled) {
        if (4 + length > block.length) {
          const bigger = Buffer.allocUnsafeSlow(4 + length);
          block.copy(bigger, 0, at, filled);
          block = bigger;
          filled -= at;
          at = 0;
        }
        break;
      }
      if (!take(block.subarray(at + 4, at + 4 + length))) return `record ${taken} is not a well-formed token`;
      taken++;
      at += 4 + length;
    }
    if (pos >= end) break;
    block.copy(block, 0, at, filled);
    filled -= at;
    at = 0;
    const want = Math.min(block.length - filled, end - pos);
    const { bytesRead } = await file.read(block, filled, want, pos);
    if (bytesRead === 0) return 'cut short';
    hash.update(block.subarray(filled, filled + bytesRead));
    filled += bytesRead;
    pos += bytesRead;
  }
  if (at !== filled || taken !== records) return `${taken} records of ${records}, ${filled - at} bytes left over`;
  const digest = Buffer.alloc(DIGEST);
  await file.read(digest, 0, DIGEST, end);
  if (!digest.equals(hash.digest())) return 'its digest does not match';
  return undefined;
}
