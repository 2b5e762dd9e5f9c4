import { lastUsesSchema } from '../store/last-use.js';
import { Packr } from 'msgpackr';
import { z } from 'zod';
import { bootstrapStateSchema } from '../store/records.js';
import { takeover } from './placement.js';
import { clusterPicture, serverRelease } from './releases.js';
import { type RecordTypes, TABLES, TABLE_NAMES, type TableName } from '../store/schema.js';
import type { Change } from '../store/store.js';

/**
 * The replication wire protocol: msgpack frames over one WebSocket, each validated
 * with zod on receipt. The version travels in the upgrade URL (so a mismatch is refused
 * before any frame) and again in `hello`.
 *
 *   secondary -> primary   hello, ack, ping, ids-in-use
 *   primary -> secondary   welcome, snapshot (chunked, last one flagged), entries, ping, error, check-ids, uses, handover
 *
 * Indexes in frames are the primary's. `upTo` says the stream is complete up to that
 * primary index once the frame is applied, so a secondary knows how current it is even
 * when the primary's last changes were not to global objects.
 */
/**
 * The version a connection speaks when nothing was agreed (a peer of release 0.1.0, which names
 * exactly this one in its upgrade). 3: the reaper's deletes travel as one `expire` change per
 * batch. 4: the primary's epoch in hello (the highest the secondary has seen), welcome and ping.
 * 5 (release 0.2.0): `servers` and `cluster` frames. The range spoken is version.ts's
 * REPLICATION_PROTOCOL; a secondary names it in its upgrade (`version` its lowest, `max` its
 * highest), the primary answers the one agreed in PROTOCOL_HEADER, and both speak it.
 */
export const PROTOCOL_VERSION = 4;

/** The header of an upgrade's answer that says the version agreed (absent: a primary of 0.1.0, which speaks PROTOCOL_VERSION). */
export const PROTOCOL_HEADER = 'x-service-protocol';

/** A primary epoch on the wire: 1 for the first primary, raised by each promotion. */
const epoch = z.number().int().positive();

/** IDs asked about in one check-ids frame, at most. */
export const MAX_CHECKED_IDS = 16;

/** The WebSocket route on the primary. */
export const REPLICATION_PATH = '/v1/internal/replication';

const datacenterInfo = z.strictObject({ name: z.string(), address: z.string() });

// Built from the table list: a set of each table's records (checked by its schema), the bootstrap state, a delete.
const change = z.union([
  ...TABLE_NAMES.map((t) => z.strictObject({ Table: z.literal(t), Op: z.literal('set'), ID: z.string(), Value: TABLES[t].schema })),
  z.strictObject({ Table: z.literal('bootstrap'), Op: z.literal('set'), ID: z.string(), Value: bootstrapStateSchema }),
  z.strictObject({ Table: z.enum(TABLE_NAMES), Op: z.literal('delete'), ID: z.string() }),
  z.strictObject({
    Table: z.literal('tokens'),
    Op: z.literal('expire'),
    ID: z.literal(''),
    Value: z.strictObject({ Time: z.number(), AccessorID: z.string().max(128) }),
  }),
]) as unknown as z.ZodType<Change>;

/** One array of records per table (a snapshot chunk); a table a chunk does not carry is empty. */
const recordArrays = Object.fromEntries(TABLE_NAMES.map((t) => [t, z.array(TABLES[t].schema).default([])])) as unknown as {
  [T in TableName]: z.ZodDefault<z.ZodArray<z.ZodType<RecordTypes[T]>>>;
};

const logEntry = z.strictObject({ Index: z.number().int().positive(), Changes: z.array(change) });

export const secondaryFrame = z.discriminatedUnion('t', [
  z.strictObject({
    t: z.literal('hello'),
    v: z.number().int(),
    /** The secondary's datacenter name. */
    datacenter: z.string(),
    /** The secondary's HTTP address (host:port), for ?dc= forwarding. */
    address: z.string(),
    /** Identity of the primary log the secondary follows; null before its first sync. */
    logID: z.string().nullable(),
    /** Last primary index the secondary applied. */
    index: z.number().int().nonnegative(),
    /** The highest primary epoch the secondary has seen: a primary of a lower one is stale. */
    epoch,
  }),
  z.strictObject({ t: z.literal('ack'), index: z.number().int().nonnegative() }),
  z.strictObject({ t: z.literal('ping'), time: z.number() }),
  /** Answer to check-ids: which of the IDs a Local token of this datacenter holds. */
  z.strictObject({ t: z.literal('ids-in-use'), req: z.number().int(), inUse: z.array(z.string()).max(MAX_CHECKED_IDS) }),
  /** Last uses of global tokens seen in the secondary's datacenter (docs/http-api.md, "Last use"): [AccessorID, ms]. */
  z.strictObject({ t: z.literal('uses'), uses: lastUsesSchema }),
  /** Version 5: this datacenter's servers, the release each runs and the versions it speaks (replication/releases.ts). */
  z.strictObject({ t: z.literal('servers'), servers: z.array(serverRelease).max(64) }),
]);

export const primaryFrame = z.discriminatedUnion('t', [
  z.strictObject({
    t: z.literal('welcome'),
    v: z.number().int(),
    logID: z.string(),
    primaryIndex: z.number().int().nonnegative(),
    mode: z.enum(['tail', 'snapshot']),
    datacenters: z.array(datacenterInfo),
    /** The primary's epoch. */
    epoch,
    /**
     * Where this primary took over (a promotion or a handover): the previous primary, its epoch and
     * its last index applied here then. The previous primary, rejoining, names as rolled back the
     * objects it changed after that index.
     */
    since: takeover.optional(),
  }),
  z.strictObject({
    t: z.literal('snapshot'),
    logID: z.string(),
    /** The primary index the snapshot shows. */
    index: z.number().int().nonnegative(),
    ...recordArrays,
    bootstrap: bootstrapStateSchema.nullable(),
    /** True on the final chunk: apply the whole snapshot then. */
    last: z.boolean(),
  }),
  z.strictObject({
    t: z.literal('entries'),
    entries: z.array(logEntry),
    upTo: z.number().int().nonnegative(),
    /** When the frame's first entry became durable on the primary, ms since the epoch (lag metrics). */
    committedAt: z.number().optional(),
  }),
  z.strictObject({
    t: z.literal('ping'),
    time: z.number(),
    upTo: z.number().int().nonnegative(),
    primaryIndex: z.number().int().nonnegative(),
    datacenters: z.array(datacenterInfo),
    epoch,
  }),
  z.strictObject({ t: z.literal('error'), code: z.string(), message: z.string() }),
  /** Before a global token with chosen IDs is created: does a Local token here hold any of them? */
  z.strictObject({ t: z.literal('check-ids'), req: z.number().int(), ids: z.array(z.string()).max(MAX_CHECKED_IDS) }),
  /** Last uses of global tokens the primary wrote (seen anywhere): [AccessorID, ms] (docs/http-api.md, "Last use"). */
  z.strictObject({ t: z.literal('uses'), uses: lastUsesSchema }),
  /**
   * A planned transfer (docs/datacenters.md): the primary, taking no writes, has sent everything up to `upTo`;
   * the secondary, once it has applied that much, becomes the primary with `epoch`.
   */
  z.strictObject({ t: z.literal('handover'), epoch, upTo: z.number().int().nonnegative() }),
  /** Version 5: the cluster's picture (every datacenter's servers and releases) and the level it was finalized at. */
  z.strictObject({ t: z.literal('cluster'), picture: clusterPicture }),
]);

export type SecondaryFrame = z.infer<typeof secondaryFrame>;
export type PrimaryFrame = z.infer<typeof primaryFrame>;
export type SnapshotFrame = Extract<PrimaryFrame, { t: 'snapshot' }>;
export type DatacenterInfo = z.infer<typeof datacenterInfo>;

const packr = new Packr({ useRecords: false, moreTypes: false });

/** Encodes a frame of either stream (replication between datacenters, or between a datacenter's servers). */
export const encodeFrame = (frame: object): Buffer => packr.pack(frame);

export class FrameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FrameError';
  }
}

/** Decodes and validates a frame; anything malformed is a FrameError (close the connection, apply nothing). */
export function decodeFrame<T>(schema: z.ZodType<T>, data: unknown): T {
  let raw: unknown;
  try {
    const bytes = Array.isArray(data) ? Buffer.concat(data as Buffer[]) : Buffer.isBuffer(data) ? data : Buffer.from(data as ArrayBuffer);
    raw = packr.unpack(bytes);
  } catch (err) {
    throw new FrameError(`undecodable frame: ${(err as Error).message}`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success)
    throw new FrameError(
      `invalid frame: ${parsed.error.issues[0]?.message ?? 'unknown problem'} at ${parsed.error.issues[0]?.path.join('.') ?? ''}`,
    );
  return parsed.data;
}
