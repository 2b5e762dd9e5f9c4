import { LastUseBook } from './last-use.js';
import { constants } from 'node:fs';
import { open, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Level } from 'level';
import { WatchwordError } from '../domain/errors.js';
import type { Scope } from '../domain/types.js';
import { type DecodedPair, decodePair } from './disk-format.js';
import { shareRecordParts } from './record-check.js';
import { LEVEL_OPTIONS } from './level-options.js';
import { type Tables, newTables } from './memory.js';
import type { AnyTable } from './table.js';
import { encode } from './records.js';
import { type RecordTypes, TABLE_NAMES, type TableName, recordKey } from './schema.js';

/**
 * A whole new store, written beside the current one and made current in one step: how a
 * server takes in a state too large to hold twice (a secondary's catch-up, an HA follower's
 * snapshot, a restore). Records arrive in any number of pieces; each piece is written to a
 * LevelDB of its own (`<dir>.next`) in bounded batches and put into tables in memory that will
 * be the server's tables once it is made current, so the memory it takes is the new state
 * and one batch, never a copy of the whole. Until then the server serves its current state.
 *
 * Making it current (`LevelStore.install`) closes the current store, swaps the directories
 * (`<dir>` becomes `<dir>.old`, `<dir>.next` becomes `<dir>`) and removes the old one. A
 * staged store is marked complete (a READY file, synced) before the swap, so a start after a
 * crash at any moment finds a whole store: the old one, or the complete new one
 * (`settleStagedStore`). An incomplete staging is removed at start.
 */
export class StagedStore {
  /** The new state's tables, built as records are staged (no record is held twice). */
  readonly tables: Tables = newTables();
  readonly meta = new Map<string, unknown>();
  /** Last uses the new store holds (an HA snapshot's; a catch-up and a restore carry none). */
  readonly lastUse = new LastUseBook();
  private batch: ReturnType<Level<string, Uint8Array>['batch']>;
  private batchBytes = 0;
  private finished = false;
  /** Tables whose ordered index is sorted once staging ends. */
  private loading = true;

  private constructor(
    private readonly db: Level<string, Uint8Array>,
    readonly dir: string,
    /**
     * Bytes a batch takes before it is written. 1 MB: LevelDB builds each batch in one buffer
     * that doubles as it fills, and freeing buffers of 4-8 MB made malloc serve later large
     * allocations from its heap and keep it (a 1M-token catch-up peaked at 587-619 MB with 4 MB
     * batches, 538-552 MB with 1 MB, in the same time).
     */
    private readonly batchLimit: number,
  ) {
    this.batch = db.batch();
  }

  /** Starts a staging beside the store in `storeDir` (an earlier, unfinished one is removed). */
  static async create(storeDir: string, batchLimit = 1024 * 1024): Promise<StagedStore> {
    const dir = stagingDir(storeDir);
    await rm(dir, { recursive: true, force: true });
    const db = new Level<string, Uint8Array>(dir, LEVEL_OPTIONS);
    await db.open();
    return new StagedStore(db, dir, batchLimit);
  }

  /** Being written: neither made current nor given up yet. */
  get active(): boolean {
    return !this.finished && this.abandoned === undefined;
  }

  /** Records held now, per table. */
  count(table: TableName): number {
    return this.tables[table].size;
  }

  /** Stages a record (known to be the only one of its ID staged so far). */
  async putRecord<T extends TableName>(table: T, record: RecordTypes[T]): Promise<void> {
    shareRecordParts(record as Record<string, unknown>);
    const bytes = encode(record);
    this.batch.put(recordKey(table, this.idOf(table, record)), bytes);
    this.batchBytes += bytes.length + 64;
    (this.tables[table] as AnyTable).put(record, { bytes, loading: this.loading });
    if (this.batchBytes >= this.batchLimit) await this.flush(false);
  }

  /** Removes a staged record (after staging ends: `endLoading`). */
  async deleteRecord(table: TableName, id: string): Promise<void> {
    this.batch.del(recordKey(table, id));
    this.batchBytes += 64;
    (this.tables[table] as AnyTable).delete(id);
  }

  /** A metadata value of the new store. */
  putMeta(key: string, value: unknown): void {
    this.meta.set(key, value);
    const bytes = encode(value);
    this.batch.put(key, bytes);
    this.batchBytes += bytes.length + 64;
  }

  /**
   * A key/value pair as a leader's store holds it (an HA snapshot), checked and decoded as a
   * follower checks its leader's batches; other keys (the change log) are written as they are.
   */
  async putPair(key: string, value: Uint8Array): Promise<void> {
    const d: DecodedPair = decodePair(key, value);
    if (d.kind === 'record' && d.record !== null) {
      shareRecordParts(d.record as Record<string, unknown>);
      (this.tables[d.table] as AnyTable).put(d.record as Scope, { ...(d.bytes ? { bytes: d.bytes } : {}), loading: this.loading });
    } else if (d.kind === 'meta' && d.value !== undefined) {
      this.meta.set(d.key, d.value);
    } else if (d.kind === 'lastUse' && d.ms !== null) {
      this.lastUse.adopt(d.id, d.ms);
    }
    this.batch.put(key, value);
    this.batchBytes += key.length + value.length + 16;
    if (this.batchBytes >= this.batchLimit) await this.flush(false);
  }

  /** Staging of records ends: the tables' ordered indexes are sorted (deletes may follow). */
  endLoading(): void {
    if (!this.loading) return;
    this.loading = false;
    for (const t of TABLE_NAMES) this.tables[t].finishLoading();
  }

  private idOf<T extends TableName>(table: T, record: RecordTypes[T]): string {
    return (this.tables[table] as AnyTable).def.id(record);
  }

  private async flush(sync: boolean): Promise<void> {
    const batch = this.batch;
    this.batch = this.db.batch();
    this.batchBytes = 0;
    await batch.write({ sync });
  }

  /** Writes what is left (synced), closes the new store and marks it complete. */
  async finish(): Promise<void> {
    if (this.finished) return;
    this.endLoading();
    await this.flush(true);
    await this.db.close();
    this.finished = true;
    const ready = await open(`${this.dir}/READY`, constants.O_CREAT | constants.O_WRONLY | constants.O_TRUNC, 0o600);
    try {
      await ready.writeFile('complete\n');
      await ready.sync();
    } finally {
      await ready.close();
    }
    await syncDir(this.dir);
  }

  /** Gives the staging up: its directory is removed (once, however often asked). */
  abandon(): Promise<void> {
    this.abandoned ??= (async () => {
      if (!this.finished) {
        this.finished = true;
        await this.batch.close().catch(() => undefined);
        await this.db.close().catch(() => undefined);
      }
      await rm(this.dir, { recursive: true, force: true });
    })();
    return this.abandoned;
  }

  private abandoned: Promise<void> | undefined;
}

export const stagingDir = (storeDir: string): string => `${storeDir}.next`;
const oldDir = (storeDir: string): string => `${storeDir}.old`;

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Makes a complete staged store the store of `storeDir` (the store must be closed): the
 * current directory is moved aside, the staged one takes its place, the old one is removed.
 */
export async function swapInStagedStore(storeDir: string): Promise<void> {
  const next = stagingDir(storeDir);
  if (!(await exists(`${next}/READY`))) throw new WatchwordError('INTERNAL', `the staged store in ${next} is not complete`);
  const old = oldDir(storeDir);
  await rm(old, { recursive: true, force: true });
  if (await exists(storeDir)) await rename(storeDir, old);
  await rename(next, storeDir);
  await syncDir(dirname(storeDir));
  await rm(`${storeDir}/READY`, { force: true });
  await rm(old, { recursive: true, force: true });
}

/**
 * At start, before the store in `storeDir` opens: a staging interrupted before it was
 * complete is removed; a complete one whose swap was interrupted is swapped in; an old
 * directory left behind is removed. Returns what it did, for the log.
 */
export async function settleStagedStore(storeDir: string): Promise<'none' | 'removed-incomplete' | 'completed-swap'> {
  const next = stagingDir(storeDir);
  let done: 'none' | 'removed-incomplete' | 'completed-swap' = 'none';
  if (await exists(next)) {
    if (await exists(`${next}/READY`)) {
      await swapInStagedStore(storeDir);
      done = 'completed-swap';
    } else {
      await rm(next, { recursive: true, force: true });
      done = 'removed-incomplete';
    }
  }
  await rm(oldDir(storeDir), { recursive: true, force: true });
  return done;
}
