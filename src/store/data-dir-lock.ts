import { join } from 'node:path';
import { Level } from 'level';
import { openExplained } from './level-options.js';

/**
 * The data dir held by one daemon for its whole life. LevelDB's own lock (its LOCK file, an
 * fcntl lock the kernel drops with the process, even a killed one) guards the store only while
 * LevelDB is open, and a daemon has it closed at times it cannot avoid: after a load of the
 * tokens from LevelDB at a start (reopened to unmap the table files it read),
 * while a staged store is swapped in (the directory itself is replaced), while a write error
 * is recovered from (LevelDB keeps a failed write until reopened), and before the checkpoint
 * is written at a clean stop. A second daemon started on the same data dir in such a moment
 * would take the store, and the audit log beside it. So a daemon first opens a small, empty
 * LevelDB in `DATA_DIR/lock` (a few kilobytes) and keeps it open until everything else is
 * closed: the same kernel lock, held throughout.
 */
export interface DataDirLock {
  release(): Promise<void>;
}

/** Takes the lock of `dataDir` (which exists); a WatchwordError naming it when another process holds it. */
export async function holdDataDirLock(dataDir: string): Promise<DataDirLock> {
  const db = new Level<string, string>(join(dataDir, 'lock'), { writeBufferSize: 64 * 1024, maxOpenFiles: 10 });
  await openExplained(
    db,
    `data dir ${dataDir} is in use by another process (its lock is held)`,
    `cannot take the lock of data dir ${dataDir}`,
  );
  return { release: () => db.close() };
}
