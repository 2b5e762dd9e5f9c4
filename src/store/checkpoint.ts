import { createHash } from 'node:crypto';
import { type FileHandle, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { DumpPart, TableDumpMeta } from './compact/dump.js';

/**
 * A start without a scan of the tokens. At a clean close the store writes its tokens table as
 * memory holds it to one file in the store's directory: the records' bytes packed as the arena
 * keeps them, the ID tables' typed arrays as they are, each index's members. The next open
 * reads those bytes back into the same structures (nothing decoded, nothing hashed again), so
 * a restart costs about reading the file.
 *
 * The file is trusted only for the LevelDB files it was written beside: it names every file in
 * the directory with its size and modification time, taken after LevelDB closed. Anything that opens LevelDB again
 * (this store, a tool, a copy restored into the directory) starts a new log file, so the
 * listing no longer matches and the open scans LevelDB as it always did. The open removes the
 * file once read: a crash leaves no checkpoint behind. A file that does not end in the SHA-256
 * of what it holds, names other fields, or whose parts do not fit together, is set aside the
 * same way.
 */

const FILE = 'tokens.checkpoint';
const MAGIC = Buffer.from('watchword tokens checkpoint 5\n');
const DIGEST = 32;
const BLOCK = 16 * 1024 * 1024;

interface Header {
  /** The LevelDB files it was written beside: name, size, modification time; sorted by name. */
  listing: Array<[string, number, number]>;
  /** The fields of the positional records, in order. */
  fields: string[];
  records: number;
  meta: TableDumpMeta;
  /** Each part's length, and the buffer it is read into when larger. */
  parts: Array<{ length: number; capacity?: number }>;
  /**
   * An HA server's store: the last batch of its batch log, which the tokens hold every change of.
   * Release 0.1.0 wrote none, and wrote a follower's checkpoint without the batches its leader had
   * not yet said were committed, though LevelDB held them: such a checkpoint is set aside there.
   */
  seq?: number;
}

/** A table a checkpoint is written from and read into (a compact table). */
export interface CheckpointTable {
  /** The fields of its positional records, in order: a checkpoint of other fields is set aside. */
  readonly fields: readonly string[];
  readonly size: number;
  dump(): { meta: TableDumpMeta; parts: DumpPart[] };
  /** Takes a dump read back; throws when it does not fit together. */
  restore(meta: TableDumpMeta, parts: readonly Buffer[]): void;
}

/** What a checkpoint in `dir` (if any) is good for: a reason it is not, or how to read it. */
export type Checkpoint =
  | { usable: false; why: string }
  | {
      usable: true;
      /** An HA server's: the last batch the tokens hold (none from release 0.1.0). */
      seq: number | undefined;
      /** Restores `into` (a new table); a reason when the checkpoint does not hold (`into` is then to be dropped). */
      load: (into: CheckpointTable) => Promise<string | undefined>;
    };

/**
 * The directory's files other than a checkpoint's, with their sizes and modification times,
 * sorted by name: a file written in place after the close (same size) no longer matches either.
 */
async function listing(dir: string): Promise<Array<[string, number, number]>> {
  const names = (await readdir(dir)).filter((n) => !n.startsWith(FILE)).sort();
  return Promise.all(
    names.map(async (n): Promise<[string, number, number]> => {
      const st = await stat(join(dir, n));
      return [n, st.size, st.mtimeMs];
    }),
  );
}

/** Writes the checkpoint of `table` to `dir`, whose LevelDB is closed. `sync`: flushed to the disk before it is named. */
export async function writeCheckpoint(dir: string, table: CheckpointTable, sync: boolean, seq?: number): Promise<void> {
  const { meta, parts } = table.dump();
  const header: Header = {
    listing: await listing(dir),
    fields: [...table.fields],
    records: table.size,
    meta,
    parts: parts.map((p) => ('bytes' in p ? { length: p.bytes.length } : { length: p.length, capacity: p.capacity })),
    ...(seq !== undefined ? { seq } : {}),
  };
  const json = Buffer.from(JSON.stringify(header));
  const tmp = join(dir, `${FILE}.tmp`);
  const file = await open(tmp, 'w', 0o600);
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafeSlow(BLOCK);
  let at = 0;
  const flush = async () => {
    hash.update(buf.subarray(0, at));
    await writeAll(file, buf.subarray(0, at));
    at = 0;
  };
  const put = async (bytes: Uint8Array) => {
    if (at + bytes.length > buf.length) await flush();
    if (bytes.length > buf.length) {
      hash.update(bytes);
      await writeAll(file, bytes);
      return;
    }
    buf.set(bytes, at);
    at += bytes.length;
  };
  try {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(json.length);
    await put(MAGIC);
    await put(len);
    await put(json);
    for (const p of parts) {
      if ('bytes' in p) {
        await put(p.bytes);
        continue;
      }
      let left = p.length;
      while (left > 0) {
        const next = p.stream.next();
        if (next.done || next.value.length > left) throw new Error('records do not fill the arena chunk they were laid out in');
        await put(next.value);
        left -= next.value.length;
      }
    }
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
  let head: Buffer;
  let size: number;
  try {
    size = (await file.stat()).size;
    const start = Buffer.alloc(MAGIC.length + 4);
    await readAll(file, start, 0);
    if (!start.subarray(0, MAGIC.length).equals(MAGIC)) return closed(file, 'not a checkpoint of this format');
    const jsonLength = start.readUInt32BE(MAGIC.length);
    if (start.length + jsonLength + DIGEST > size) return closed(file, 'cut short');
    head = Buffer.alloc(start.length + jsonLength);
    await readAll(file, head, 0);
    header = JSON.parse(head.subarray(start.length).toString('utf8')) as Header;
  } catch (err) {
    return closed(file, `unreadable: ${(err as Error).message}`);
  }
  await file.close();
  if (JSON.stringify(header.listing) !== JSON.stringify(await listing(dir)))
    return { usable: false, why: 'the store changed since it was written' };
  return {
    usable: true,
    seq: typeof header.seq === 'number' ? header.seq : undefined,
    // The file is opened again to be read: nothing stays open if the open never gets that far.
    load: async (into) => {
      let file: FileHandle;
      try {
        file = await open(path, 'r');
      } catch (err) {
        return `unreadable: ${(err as Error).message}`;
      }
      try {
        if (JSON.stringify(header.fields) !== JSON.stringify(into.fields)) return 'written for other fields';
        const body = header.parts.reduce((n, p) => n + p.length, 0);
        if (head.length + body + DIGEST !== size) return 'cut short';
        const hash = createHash('sha256').update(head);
        const parts: Buffer[] = [];
        let pos = head.length;
        for (const p of header.parts) {
          const b = Buffer.allocUnsafeSlow(Math.max(p.length, p.capacity ?? 0));
          await readAll(file, b.subarray(0, p.length), pos);
          hash.update(b.subarray(0, p.length));
          parts.push(b);
          pos += p.length;
        }
        const digest = Buffer.alloc(DIGEST);
        await readAll(file, digest, pos);
        if (!digest.equals(hash.digest())) return 'its digest does not match';
        into.restore(header.meta, parts);
        if (into.size !== header.records) return `${into.size} records restored of ${header.records}`;
        return undefined;
      } catch (err) {
        return `its parts do not fit together: ${(err as Error).message}`;
      } finally {
        await file.close();
      }
    },
  };
}

async function readAll(file: FileHandle, into: Uint8Array, position: number): Promise<void> {
  for (let done = 0; done < into.length; ) {
    const { bytesRead } = await file.read(into, done, Math.min(into.length - done, BLOCK), position + done);
    if (bytesRead === 0) throw new Error('cut short');
    done += bytesRead;
  }
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
