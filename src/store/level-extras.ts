import type { Level } from 'level';

/**
 * What node's LevelDB (classic-level) offers beyond `level`'s own type, which names only what
 * every backend has.
 */
interface ClassicLevel {
  compactRange?(start: string, end: string): Promise<void>;
  approximateSize?(start: string, end: string): Promise<number>;
}

/**
 * Asks LevelDB to compact the keys from `start` to `end`: deleted keys take room on disk until a
 * compaction reaches the lowest level holding them, which in a small store only a seek or this does.
 */
export async function compactRange(db: Level<string, Uint8Array>, start: string, end: string): Promise<void> {
  await (db as unknown as ClassicLevel).compactRange?.(start, end);
}

/** LevelDB's estimate of the bytes the keys from `start` to `end` take on disk (0 where it cannot say). */
export async function approximateSize(db: Level<string, Uint8Array>, start: string, end: string): Promise<number> {
  return (await (db as unknown as ClassicLevel).approximateSize?.(start, end)) ?? 0;
}
