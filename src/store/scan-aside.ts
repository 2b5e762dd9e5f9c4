import type { Level } from 'level';
import { scanInWorker } from './compact/parallel-scan.js';
import { approximateSize } from './level-extras.js';
import type { ScanKeying } from './compact/scan-protocol.js';
import { type Tables, newTables } from './memory.js';
import { TABLES, key, prefixEnd } from './schema.js';

/** Tables a scan on a second thread read before the rest (compact/parallel-scan.ts), or why it did not. */
export interface ScannedAside {
  tokens?: Tables['tokens'];
  why?: string;
}

/**
 * The tokens read on a second thread while this one indexes them: `db` is closed meanwhile
 * (the worker opens it) and open again when this resolves. Without the tokens, the reason.
 * LevelDB opens once per process, so the thread needs it closed here; reading here and handing
 * the values over instead would put LevelDB's hand-over of each value, the larger part of
 * that thread's work, back on the thread a start waits for.
 */
export async function scanTokensAside(
  db: Level<string, Uint8Array>,
  dir: string,
  wanted: boolean | undefined,
  keying: ScanKeying = 'auto',
): Promise<ScannedAside | undefined> {
  const range = { gte: key(TABLES.tokens.prefix, ''), lt: prefixEnd(key(TABLES.tokens.prefix, '')) };
  if (wanted === false) return undefined;
  const size = await approximateSize(db, range.gte, range.lt);
  // A thread's start (~30 ms) is more than a small table's whole scan.
  if (wanted === undefined && size < SCAN_ASIDE_BYTES) return undefined;
  const tokens = newTables().tokens;
  const compact = tokens.compact;
  if (compact === undefined) return { why: 'tokens are not kept compact' };
  // As many tokens as there would be were each a large one: tokens larger still (rare) would leave the tables roomier than needed.
  compact.reserve(Math.floor(size / LARGE_TOKEN_BYTES));
  await db.close();
  try {
    const why = await scanInWorker(dir, range, compact, keying);
    return why === undefined ? { tokens } : { why };
  } finally {
    await db.open();
  }
}

/** LevelDB's estimate of the tokens' bytes above which they are read on a second thread (~20,000 tokens). */
const SCAN_ASIDE_BYTES = 4 * 1024 * 1024;

/**
 * A large token's share of LevelDB's estimate, bytes: a seeded token with a service identity
 * takes ~190, one with several policies and roles more. The ID tables are given room for the
 * estimate divided by this before the scan.
 */
const LARGE_TOKEN_BYTES = 320;
