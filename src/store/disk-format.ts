import type { Level } from 'level';
import { WatchwordError } from '../domain/errors.js';
import { fieldNames } from '../domain/records.js';
import type { Checkpoint } from './checkpoint.js';
import { Positional, namedValues } from './compact/positional.js';
import { type Tables, newTables } from './memory.js';
import type { AnyTable } from './table.js';
import { RECORD_CHECKS } from './record-check.js';
import { LastUseBook } from './last-use.js';
import { approximateSize } from './level-extras.js';
import { bootstrapStateSchema, decodeRaw, decodeWith, encode } from './records.js';
import {
  FORMAT1_COUNT_PREFIX,
  FORMAT1_INDEX_PREFIXES,
  FORMAT_VERSION,
  LAST_USE_PREFIX,
  META,
  POSITIONAL_FORMAT,
  POSITIONAL_FORMAT_NEEDS,
  SEP as SEP_CHAR,
  TABLES,
  TABLE_NAMES,
  type TableName,
  type WatchTable,
  key,
  prefixEnd,
} from './schema.js';

/**
 * The store as the disk holds it: reading every record into memory at start-up (each
 * checked), the format version and its upgrades, the datacenter a data dir belongs to,
 * and a leader's key/value pairs decoded and checked as a follower receives them.
 */

export const WATCH_TABLES: readonly WatchTable[] = [...TABLE_NAMES, 'bootstrap'];

export type DecodedPair =
  | { kind: 'record'; table: TableName; id: string; record: unknown | null; bytes?: Uint8Array }
  | { kind: 'meta'; key: string; value: unknown; table?: WatchTable }
  /** A token's last use as its leader wrote it (null: the token is gone). */
  | { kind: 'lastUse'; id: string; ms: number | null }
  | { kind: 'other' };

const RECORD_PREFIXES = new Map<string, TableName>((Object.keys(TABLES) as TableName[]).map((t) => [key(TABLES[t].prefix, ''), t]));
const TABLE_INDEX_KEYS = new Map<string, WatchTable>(WATCH_TABLES.map((t) => [META.tableIndex(t), t]));
const META_PREFIX = key('m', '');

/** Each table's fields in their positional order (compact/positional.ts): a positional value's names. */
const POSITIONAL_FIELDS = new Map<TableName, readonly string[]>(TABLE_NAMES.map((t) => [t, fieldNames(TABLES[t].fields)]));

/**
 * A stored record's value decoded: a msgpack map, or (tokens in a store of format 3) the
 * positional form, its values named by the table's fields (absent where nil or past its end).
 * Not checked: what it answers is checked as any record read is.
 */
export function decodeStored(table: TableName, v: Uint8Array): unknown {
  const raw = decodeRaw(v);
  if (!Array.isArray(raw)) return raw;
  const fields = POSITIONAL_FIELDS.get(table) as readonly string[];
  return raw.length > fields.length ? raw : namedValues(fields, raw);
}

/** A key/value pair of a leader's batch, decoded and checked as records read from disk are. */
export function decodePair(k: string, v: Uint8Array | null): DecodedPair {
  const sep = k.indexOf(SEP_CHAR);
  const table = sep > 0 ? RECORD_PREFIXES.get(k.slice(0, sep + 1)) : undefined;
  if (table !== undefined) {
    const id = k.slice(sep + 1);
    if (v === null) return { kind: 'record', table, id, record: null };
    let record: unknown;
    try {
      record = decodeStored(table, v);
    } catch (err) {
      throw new WatchwordError('INTERNAL', `a replicated ${table.slice(0, -1)} ${id} cannot be decoded: ${(err as Error).message}`);
    }
    if (!RECORD_CHECKS[table](record))
      throw new WatchwordError('INTERNAL', `a replicated ${table.slice(0, -1)} ${id} is not a well-formed record`);
    return { kind: 'record', table, id, record, bytes: v };
  }
  if (k.startsWith(LAST_USE_PREFIX)) return { kind: 'lastUse', id: k.slice(LAST_USE_PREFIX.length), ms: v === null ? null : lastUseOf(v) };
  if (k.startsWith(META_PREFIX)) {
    if (v === null) return { kind: 'meta', key: k, value: undefined };
    const value = k === META.bootstrap ? decodeWith(bootstrapStateSchema, v, 'bootstrap state') : decodeRaw(v);
    const t = TABLE_INDEX_KEYS.get(k);
    return t === undefined ? { kind: 'meta', key: k, value } : { kind: 'meta', key: k, value, table: t };
  }
  return { kind: 'other' };
}

/** A stored last use: a time in milliseconds, or a fault naming what it is. */
function lastUseOf(v: Uint8Array): number {
  const ms = decodeRaw(v);
  if (typeof ms !== 'number' || !Number.isFinite(ms)) throw new WatchwordError('INTERNAL', 'a stored last use is not a time');
  return ms;
}

/** Metadata and tables as the disk holds them. */
export interface LoadedState {
  meta: Map<string, unknown>;
  tables: Tables;
  /** Each token's last use as last flushed. */
  lastUse: LastUseBook;
  /** Whether the tokens were read from LevelDB (not from a checkpoint). */
  tokensScanned?: boolean;
}

/** The last uses the disk holds. */
export async function readLastUses(db: Level<string, Uint8Array>): Promise<LastUseBook> {
  const book = new LastUseBook();
  for await (const [k, v] of db.iterator({ gte: LAST_USE_PREFIX, lt: prefixEnd(LAST_USE_PREFIX) }))
    book.adopt(k.slice(LAST_USE_PREFIX.length), lastUseOf(v));
  return book;
}

/**
 * Reads metadata and every record into fresh memory tables, validating each. The tokens come
 * from `checkpoint` when one is given and holds (store/checkpoint.ts); `loaded` says how it went.
 */
export async function readState(
  db: Level<string, Uint8Array>,
  checkpoint?: Checkpoint,
  loaded?: (from: string) => void,
): Promise<LoadedState> {
  const meta = new Map<string, unknown>();
  const tables = newTables();
  let tokensScanned = false;
  for await (const [k, v] of db.iterator({ gte: key('m', ''), lt: prefixEnd(key('m', '')) })) {
    meta.set(k, k === META.bootstrap ? decodeWith(bootstrapStateSchema, v, 'bootstrap state') : decodeRaw(v));
  }
  for (const name of TABLE_NAMES) {
    const table = tables[name] as AnyTable;
    if (table.compact !== undefined && checkpoint !== undefined) {
      // An HA server's store: the checkpoint must say it holds the store's last batch (store/checkpoint.ts, `seq`).
      const seq = Number(meta.get(META.serverSeq) ?? 0);
      if (checkpoint.usable && seq > 0 && checkpoint.seq !== seq) {
        loaded?.(
          `a scan: the checkpoint was set aside (${
            checkpoint.seq === undefined ? 'it does not say which batch it holds' : `it holds batch ${checkpoint.seq}, the store ${seq}`
          })`,
        );
      } else if (checkpoint.usable) {
        const why = await checkpoint.load(table.compact);
        if (why === undefined) {
          table.finishLoading();
          loaded?.(`its checkpoint (${table.size} ${name})`);
          continue;
        }
        loaded?.(`a scan: the checkpoint was set aside (${why})`);
        // What the checkpoint gave is dropped; LevelDB's records are read instead.
        (tables as Record<string, AnyTable>)[name] = newTables()[name] as AnyTable;
      } else loaded?.(`a scan (checkpoint: ${checkpoint.why})`);
    }
    await scanTable(db, name, tables[name] as AnyTable);
    if (name === 'tokens') tokensScanned = true;
  }
  return { meta, tables, lastUse: await readLastUses(db), tokensScanned };
}

/** A stored record a start refused: named by its ID when it can be read, with how many came before it. */
function corrupt(name: TableName, before: number, bytes: Uint8Array): WatchwordError {
  let id: unknown;
  try {
    id = (decodeStored(name, bytes) as Record<string, unknown> | null)?.[
      name === 'tokens' ? 'AccessorID' : name === 'authMethods' ? 'Name' : 'ID'
    ];
  } catch {
    id = undefined;
  }
  return new WatchwordError(
    'INTERNAL',
    `stored ${name.slice(0, -1)} ${typeof id === 'string' ? id : `(${before} read before it)`} is corrupt: not a well-formed record`,
  );
}

/**
 * A large token's share of LevelDB's estimate of the table's bytes: a seeded token with a
 * service identity takes ~190, one with several policies and roles more.
 */
const LARGE_RECORD_BYTES = 320;

/** Reads every record of table `name` from LevelDB into `table`. */
async function scanTable(db: Level<string, Uint8Array>, name: TableName, table: AnyTable): Promise<void> {
  const def = TABLES[name];
  const prefix = key(def.prefix, '');
  // Room in the ID tables for as many records as there would be were each a large one (larger
  // ones still, rare, leave the tables roomier than needed): no table grows while it is read.
  if (table.compact !== undefined)
    table.compact.reserve(Math.floor((await approximateSize(db, prefix, prefixEnd(prefix))) / LARGE_RECORD_BYTES));
  // Values only, in big batches: a few native round trips and no promise per record. The
  // next batch is read from disk (on libuv's pool) while this one is decoded.
  const values = db.values({ gte: prefix, lt: prefixEnd(prefix), highWaterMarkBytes: 8 * 1024 * 1024 });
  let next: Promise<Uint8Array[]> | undefined;
  try {
    next = values.nextv(10_000);
    for (let batch = await next; batch.length > 0; batch = await (next as Promise<Uint8Array[]>)) {
      next = values.nextv(10_000);
      for (const v of batch) {
        // One way in for every table kind: it decodes and checks as it needs (a compact table reads the indexed fields only).
        if (!table.loadStored(v)) throw corrupt(name, table.size, v);
      }
    }
  } finally {
    // A read still running when a record failed its check: let it end before closing.
    await next?.catch(() => undefined);
    await values.close();
  }
  table.finishLoading();
}

/** Records which datacenter a store belongs to, and refuses one of another datacenter. */
export async function claimDatacenter(db: Level<string, Uint8Array>, dir: string, datacenter: string, sync: boolean): Promise<void> {
  const bytes = await db.get(META.datacenter);
  if (bytes === undefined) {
    await db.put(META.datacenter, encode(datacenter), { sync });
    return;
  }
  const owner = String(decodeRaw(bytes));
  if (owner !== datacenter) {
    throw new WatchwordError(
      'INTERNAL',
      `the store in ${dir} belongs to datacenter ${owner}, not ${datacenter}; start it as ${owner} or give ${datacenter} a data dir ` +
        `of its own`,
    );
  }
}

/**
 * Brings a data dir to FORMAT_VERSION, and to POSITIONAL_FORMAT once the cluster's upgrade is
 * finalized at a level whose servers all read it: the format it is in then. Format 1 stored
 * secondary-index keys and counts next to the records; they are rebuilt in memory now, so
 * upgrading deletes them. To format 3 the tokens are rewritten in the positional form, a
 * bounded batch at a time (an interrupted conversion goes on at the next start: a value already
 * positional is passed over). Until the upgrade is finalized nothing is written that the
 * previous release cannot read; a data dir written by a newer format is refused.
 */
export async function upgradeFormat(db: Level<string, Uint8Array>, dir: string, sync: boolean): Promise<number> {
  const bytes = await db.get(META.format);
  const format = bytes === undefined ? undefined : Number(decodeRaw(bytes));
  if (format !== undefined && !(format >= 1 && format <= POSITIONAL_FORMAT)) {
    throw new WatchwordError(
      'INTERNAL',
      `the store in ${dir} has format ${format}, newer than this build reads (${POSITIONAL_FORMAT}); run a newer watchword`,
    );
  }
  if (format === POSITIONAL_FORMAT) return format;
  if (format !== FORMAT_VERSION) {
    for (const prefix of [...FORMAT1_INDEX_PREFIXES, FORMAT1_COUNT_PREFIX]) {
      for (;;) {
        const keys: string[] = [];
        for await (const k of db.keys({ gte: prefix, lt: prefixEnd(prefix), limit: 10_000 })) keys.push(k);
        if (keys.length === 0) break;
        await db.batch(keys.map((k) => ({ type: 'del' as const, key: k })));
      }
    }
    await db.put(META.format, encode(FORMAT_VERSION), { sync });
  }
  const finalized = await db.get(META.finalized);
  if (finalized === undefined || !readsPositional(decodeRaw(finalized))) return FORMAT_VERSION;
  await storeTokensPositional(db);
  await db.put(META.format, encode(POSITIONAL_FORMAT), { sync });
  return POSITIONAL_FORMAT;
}

/** Whether every server of a cluster finalized at `level` reads format 3. */
function readsPositional(level: unknown): boolean {
  const { Replication, Servers } = (level ?? {}) as { Replication?: unknown; Servers?: unknown };
  return (
    typeof Replication === 'number' &&
    typeof Servers === 'number' &&
    Replication >= POSITIONAL_FORMAT_NEEDS.replication &&
    Servers >= POSITIONAL_FORMAT_NEEDS.servers
  );
}

/** Tokens rewritten a batch of at most 2,000 at a time, which is all a conversion holds in memory. */
const CONVERT_BATCH = 2_000;

/**
 * Every token stored as a map rewritten in the positional form. One that has none (not a map of
 * declared fields: corrupt) is left as it is, for the load to refuse by name.
 */
async function storeTokensPositional(db: Level<string, Uint8Array>): Promise<void> {
  const positional = new Positional(POSITIONAL_FIELDS.get('tokens') as readonly string[]);
  const prefix = key(TABLES.tokens.prefix, '');
  const it = db.iterator({ gte: prefix, lt: prefixEnd(prefix), highWaterMarkBytes: 8 * 1024 * 1024 });
  try {
    for (let entries = await it.nextv(CONVERT_BATCH); entries.length > 0; entries = await it.nextv(CONVERT_BATCH)) {
      const batch = db.batch();
      let n = 0;
      for (const [k, v] of entries) {
        if (Positional.is(v)) continue;
        const kept = positional.fromMap(v);
        if (kept === undefined) continue;
        batch.put(k, Buffer.from(kept));
        n++;
      }
      if (n > 0) await batch.write();
      else await batch.close();
    }
  } finally {
    await it.close();
  }
}
