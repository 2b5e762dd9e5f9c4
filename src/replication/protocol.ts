import type { IncomingMessage } from 'node:http';
import { Packr } from 'msgpackr';
import { z } from 'zod';
import { authMethodRecordSchema, bindingRuleRecordSchema, bootstrapStateSchema, policyRecordSchema, roleRecordSchema, tokenRecordSchema } from '../store/records.js';
import { TABLE_NAMES } from '../store/schema.js';

/**
 * The replication wire protocol: msgpack frames over one WebSocket, each validated
 * with zod on receipt. The version travels in the upgrade URL (so a mismatch is refused
 * before any frame) and again in `hello`.
 *
 *   secondary -> primary   hello, ack, ping, ids-in-use
 *   primary -> secondary   welcome, snapshot (chunked, last one flagged), entries, ping, error, check-ids
 *
 * Indexes in frames are the primary's. `upTo` says the stream is complete up to that
 * primary index once the frame is applied, so a secondary knows how current it is even
 * when the primary's last changes were not to global objects.
 */
export const PROTOCOL_VERSION = 2;

/** IDs asked about in one check-ids frame, at most. */
export const MAX_CHECKED_IDS = 16;

/** The WebSocket route on the primary. */
export const REPLICATION_PATH = '/v1/internal/replication';

const datacenterInfo = z.object({ name: z.string(), address: z.string() });

const change = z.union([
  z.object({ Table: z.literal('tokens'), Op: z.literal('set'), ID: z.string(), Value: tokenRecordSchema }),
  z.object({ Table: z.literal('policies'), Op: z.literal('set'), ID: z.string(), Value: policyRecordSchema }),
  z.object({ Table: z.literal('roles'), Op: z.literal('set'), ID: z.string(), Value: roleRecordSchema }),
  z.object({ Table: z.literal('authMethods'), Op: z.literal('set'), ID: z.string(), Value: authMethodRecordSchema }),
  z.object({ Table: z.literal('bindingRules'), Op: z.literal('set'), ID: z.string(), Value: bindingRuleRecordSchema }),
  z.object({ Table: z.literal('bootstrap'), Op: z.literal('set'), ID: z.string(), Value: bootstrapStateSchema }),
  z.object({ Table: z.enum(TABLE_NAMES), Op: z.literal('delete'), ID: z.string() }),
]);

const logEntry = z.object({ Index: z.number().int().positive(), Changes: z.array(change) });

export const secondaryFrame = z.discriminatedUnion('t', [
  z.object({
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
  }),
  z.object({ t: z.literal('ack'), index: z.number().int().nonnegative() }),
  z.object({ t: z.literal('ping'), time: z.number() }),
  /** Answer to check-ids: which of the IDs a Local token of this datacenter holds. */
  z.object({ t: z.literal('ids-in-use'), req: z.number().int(), inUse: z.array(z.string()).max(MAX_CHECKED_IDS) }),
]);

export const primaryFrame = z.discriminatedUnion('t', [
  z.object({
    t: z.literal('welcome'),
    v: z.number().int(),
    logID: z.string(),
    primaryIndex: z.number().int().nonnegative(),
    mode: z.enum(['tail', 'snapshot']),
    datacenters: z.array(datacenterInfo),
  }),
  z.object({
    t: z.literal('snapshot'),
    logID: z.string(),
    /** The primary index the snapshot shows. */
    index: z.number().int().nonnegative(),
    tokens: z.array(tokenRecordSchema),
    policies: z.array(policyRecordSchema),
    roles: z.array(roleRecordSchema),
    authMethods: z.array(authMethodRecordSchema).default([]),
    bindingRules: z.array(bindingRuleRecordSchema).default([]),
    bootstrap: bootstrapStateSchema.nullable(),
    /** True on the final chunk: apply the whole snapshot then. */
    last: z.boolean(),
  }),
  z.object({
    t: z.literal('entries'),
    entries: z.array(logEntry),
    upTo: z.number().int().nonnegative(),
    /** When the frame's first entry became durable on the primary, ms since the epoch (lag metrics). */
    committedAt: z.number().optional(),
  }),
  z.object({ t: z.literal('ping'), time: z.number(), upTo: z.number().int().nonnegative(), primaryIndex: z.number().int().nonnegative(), datacenters: z.array(datacenterInfo) }),
  z.object({ t: z.literal('error'), code: z.string(), message: z.string() }),
  /** Before a global token with chosen IDs is created: does a Local token here hold any of them? */
  z.object({ t: z.literal('check-ids'), req: z.number().int(), ids: z.array(z.string()).max(MAX_CHECKED_IDS) }),
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
  if (!parsed.success) throw new FrameError(`invalid frame: ${parsed.error.issues[0]?.message ?? 'unknown problem'} at ${parsed.error.issues[0]?.path.join('.') ?? ''}`);
  return parsed.data;
}

/** The secret a stream's upgrade request carries (X-Service-Token, X-Consul-Token or a bearer token). */
export function secretOf(req: IncomingMessage): string | undefined {
  const h = (name: string) => {
    const v = req.headers[name];
    return (Array.isArray(v) ? v[0] : v) || undefined;
  };
  const bearer = /^Bearer\s+(.+)$/i.exec(h('authorization') ?? '')?.[1]?.trim();
  return h('x-service-token') ?? h('x-consul-token') ?? bearer;
}
