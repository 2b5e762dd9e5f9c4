import { Level } from 'level';
import { WatchwordError } from '../domain/errors.js';
import { generateID } from '../domain/ids.js';
import { type Checkpoint, findCheckpoint } from './checkpoint.js';
import { claimDatacenter, upgradeFormat } from './disk-format.js';
import { LEVEL_OPTIONS, openExplained } from './level-options.js';
import { decodeRaw, encode } from './records.js';
import { META } from './schema.js';
import { settleStagedStore } from './staging.js';
import type { Durability } from './store.js';

export interface LevelStoreOptions {
  /** `fsync` syncs every group commit; `os` leaves flushing to the page cache. */
  durability: Durability;
  /** Write the replicated change log (the primary does; secondaries apply instead). */
  changeLog: boolean;
  /** Recent change-log entries kept in memory for secondaries that are nearly current. */
  logTailEntries?: number;
  /** Told when the store stops and starts accepting writes (metrics, logs). */
  onAvailability?: (available: boolean, cause?: unknown) => void;
  /** The datacenter this store belongs to: recorded on first open, and a store of another one is refused. */
  datacenter?: string;
  /**
   * A clean close writes the tokens as held in memory beside LevelDB, and the next open reads
   * them from there instead of scanning (store/checkpoint.ts). Default true.
   */
  checkpoint?: boolean;
  /** Told when a clean close could not write its checkpoint (the next open scans instead). */
  onCheckpointFailed?: (err: unknown) => void;
  /** Tests only: makes disk writes fail on demand (an Error to throw, or undefined). */
  faults?: { writeError?: () => Error | undefined };
}

/** The store's LevelDB (opened by the caller). */
export function openLevel(dir: string): Level<string, Uint8Array> {
  return new Level<string, Uint8Array>(dir, LEVEL_OPTIONS);
}

/**
 * The disk side of an open: a staged store a crash interrupted settled, the checkpoint judged
 * (before LevelDB opens: an open changes the files it was written beside), LevelDB opened (a data
 * dir in use refused in plain words), its format upgraded (the format it is in answered), its
 * change log's identity made on first use, and the datacenter it belongs to claimed (another's
 * refused).
 */
export async function openDisk(
  dir: string,
  options: LevelStoreOptions,
): Promise<{ db: Level<string, Uint8Array>; logID: string; checkpoint: Checkpoint | undefined; format: number }> {
  await settleStagedStore(dir);
  const checkpoint = options.checkpoint === false ? undefined : await findCheckpoint(dir);
  const db = openLevel(dir);
  await openExplained(db, `data dir ${dir} is in use by another process (LevelDB lock held)`, `cannot open the store in ${dir}`);
  try {
    const sync = options.durability === 'fsync';
    const format = await upgradeFormat(db, dir, sync);
    let logIDBytes = await db.get(META.logID);
    if (logIDBytes === undefined) {
      logIDBytes = encode(generateID());
      await db.put(META.logID, logIDBytes, { sync });
    }
    if (options.datacenter !== undefined) await claimDatacenter(db, dir, options.datacenter, sync);
    return { db, logID: String(decodeRaw(logIDBytes)), checkpoint, format };
  } catch (err) {
    await db.close().catch(() => undefined);
    throw explainOpenFailure(dir, err);
  }
}

/** A failed open in plain words: LevelDB's own name the damaged file. */
export function explainOpenFailure(dir: string, err: unknown): WatchwordError {
  if (err instanceof WatchwordError) return err;
  return new WatchwordError('INTERNAL', `the store in ${dir} is corrupt or unreadable: ${(err as Error).message.replace(/\s+/g, ' ')}`, {
    cause: err,
  });
}
