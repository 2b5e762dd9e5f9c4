import type { Level } from 'level';
import { WatchwordError } from '../domain/errors.js';

/**
 * How every store's LevelDB is opened. LevelDB maps each table file it has open into memory, and
 * a start reads every file: with its default of 1,000 open files, ten million tokens left 1.9 GB
 * of file pages mapped (counted in RSS) after the load. Everything is read from memory after the
 * start, so few files need to stay open: 74 is the least LevelDB accepts (64 table files, ~128 MB).
 */
export const LEVEL_OPTIONS = {
  keyEncoding: 'utf8',
  valueEncoding: 'view',
  writeBufferSize: 16 * 1024 * 1024,
  maxOpenFiles: 74,
} as const;

/**
 * Opens `db`, saying in one line what went wrong: `locked` when another process holds LevelDB's
 * lock, else `failed` followed by LevelDB's own words (which name a damaged file).
 */
export async function openExplained(db: Pick<Level<string, never>, 'open'>, locked: string, failed: string): Promise<void> {
  try {
    await db.open();
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    if (cause?.code === 'LEVEL_LOCKED') throw new WatchwordError('INTERNAL', locked, { cause: err });
    const why = cause?.message ?? (err as Error).message;
    throw new WatchwordError('INTERNAL', `${failed}: ${why.replace(/\s+/g, ' ')}`, { cause: err });
  }
}
