import { lastUsesSchema } from '../store/last-use.js';
import { z } from 'zod';
import { clusterPicture, serverRelease } from '../replication/releases.js';

/**
 * The stream between the servers of one datacenter (docs/servers.md, "Several servers per datacenter"): msgpack frames over one
 * WebSocket, validated on receipt. A follower says where its store stands; the leader
 * answers with the batches after that point, or with a snapshot of its whole store
 * followed by them, then every batch it writes, as it writes it.
 *
 *   follower -> leader   hello, ack, ping
 *   leader -> follower   welcome, snapshot (chunked, last flagged), batch, ping, error
 */
export const SERVER_PROTOCOL_VERSION = 2;

/** The WebSocket route on the leader. */
export const SERVERS_PATH = '/v1/internal/servers';

/** Largest frame: a snapshot chunk is ~4 MiB, but one batch holds a whole restore. */
export const SERVER_MAX_PAYLOAD = 512 * 1024 * 1024;

const bytes = z.custom<Uint8Array>((v) => v instanceof Uint8Array, { message: 'expected bytes' });
const position = { seq: z.number().int().nonnegative(), term: z.number().int().nonnegative() };

export const followerFrame = z.discriminatedUnion('t', [
  z.strictObject({
    t: z.literal('hello'),
    v: z.number().int(),
    /** The follower's server name and HTTP address. */
    name: z.string().min(1).max(128),
    address: z.string().max(300),
    ...position,
  }),
  /** Every batch up to `seq` is durable at the follower. */
  z.strictObject({ t: z.literal('ack'), seq: z.number().int().nonnegative() }),
  z.strictObject({ t: z.literal('ping'), time: z.number() }),
  /** Tokens' last uses the follower saw since its last report (docs/http-api.md, "Last use"): [AccessorID, ms]. */
  z.strictObject({ t: z.literal('uses'), uses: lastUsesSchema }),
  /** Version 3: the follower's release and the versions it speaks (replication/releases.ts). */
  z.strictObject({ t: z.literal('release'), server: serverRelease }),
]);

export const leaderFrame = z.discriminatedUnion('t', [
  z.strictObject({
    t: z.literal('welcome'),
    v: z.number().int(),
    term: z.number().int().nonnegative(),
    leader: z.string(),
    mode: z.enum(['tail', 'snapshot']),
  }),
  z.strictObject({
    t: z.literal('snapshot'),
    pairs: z.array(z.tuple([z.string(), bytes])),
    /** On the last chunk: the batch position the snapshot shows. */
    last: z.boolean(),
    ...position,
  }),
  z.strictObject({
    t: z.literal('batch'),
    seq: z.number().int().positive(),
    prev: z.number().int().nonnegative(),
    term: z.number().int().nonnegative(),
    ops: z.array(z.tuple([z.string(), bytes.nullable()])),
    /**
     * Every batch up to this one is committed (acknowledged): a follower shows batches only up to it. Absent: an older
     * leader, which commits each batch it sends.
     */
    commit: z.number().int().nonnegative().optional(),
  }),
  // silent: on a secondary datacenter's leader, how long the primary has been silent (ms), for replication_max_stale.
  // commit: as on a batch; a ping carries it when batches are committed after they were sent.
  z.strictObject({
    t: z.literal('ping'),
    time: z.number(),
    seq: z.number().int().nonnegative(),
    silent: z.number().nonnegative().optional(),
    commit: z.number().int().nonnegative().optional(),
  }),
  z.strictObject({ t: z.literal('error'), code: z.string(), message: z.string() }),
  /** Version 3: the cluster's picture, as the leader knows it (its own, or heard from the primary). */
  z.strictObject({ t: z.literal('cluster'), picture: clusterPicture }),
]);

export type FollowerFrame = z.infer<typeof followerFrame>;
export type LeaderFrame = z.infer<typeof leaderFrame>;
