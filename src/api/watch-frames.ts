import type { TokenAuthorizerResponse } from './schemas.js';

/**
 * The enforcing client's watch (`/v1/internal/acl/authorizer/watch`), declared once for both
 * ends: the daemon (`service/authorizer-watch.ts`) and the client (`client/token-watch.ts`).
 * JSON text frames. The upgrade carries the client's own token (X-Service-Token, X-Consul-Token
 * or `Authorization: Bearer`), which must hold `acl:read`; the beat it asks for is `?beat=` (ms).
 *
 * Client to server:
 * - `{"t":"watch","seq":N,"add":[[id,secret,hash],...]}`: tokens to watch, each named by a number
 *   of the client's, with the content hash of the view the client holds ('' for none);
 * - `{"t":"unwatch","ids":[...]}`;
 * - `{"t":"used","ids":[...]}`: tokens judged since the last such frame (their last use);
 * - `{"t":"report","client":NAME,"denied":[[id,resource,segment,access,partition,namespace,count],...],
 *   "allowed":[[id,resource,segment,access,partition,namespace],...],"unknown":N,"dropped":N}`:
 *   its decisions, at most once a second (client/decision-reports.ts).
 *
 * Server to client:
 * - `{"t":"changes","ack":N,"set":[[id,hash,view],...],"gone":[id,...]}`: new views, and tokens
 *   that no longer authenticate; `ack` is the last watch frame whose every answer has been sent;
 * - `{"t":"beat","ack":N}`: everything the client holds up to `ack` is current as of now.
 *
 * From version 3 (the upgrade's answer says `X-Service-Watch-Protocol: 3`) an addition is also a
 * first look-up: a secret this server does not hold is resolved as a request's token would be
 * (a secondary asks its primary), and an entry that cannot be answered now is named in
 * `"refused":[[id,status,retryAfterSeconds],...]` of `changes`, with the status a request for it
 * would have got (429: the address's budget of unknown secrets is spent; 5xx: the server cannot
 * answer now); it is not watched. Unknown secrets never close a version 3 watch.
 */

/** The first watch protocol version whose additions are first look-ups (version.ts, WATCH_PROTOCOL). */
export const WATCH_LOOKUPS = 3;

/** Tokens one watch frame may add. */
export const MAX_ADD = 5_000;
/** Tokens one connection may watch at once. */
export const MAX_WATCHED = 100_000;
/** Entries one report may hold. */
export const MAX_REPORTED = 1_000;
/** Longest secret a watch entry may carry, and longest hash. */
const MAX_SECRET = 256;
const MAX_HASH = 64;
/** Longest segment a reported check may name (longer ones are cut where they are kept). */
export const MAX_REPORTED_SEGMENT = 4_096;

/** One reported decision: [id, resource, segment or null, access, partition, namespace(, count for a denial)]. */
export type ReportedEntry = [number, string, string | null, string, string, string, number?];

export interface ReportFrame {
  t: 'report';
  client: string;
  denied: ReportedEntry[];
  allowed: ReportedEntry[];
  unknown: number;
  dropped: number;
}

export type WatchClientFrame =
  | { t: 'watch'; seq: number; add: Array<[number, string, string]> }
  | { t: 'unwatch'; ids: number[] }
  | { t: 'used'; ids: number[] }
  | ReportFrame;

/** An entry a version 3 watch could not answer: [id, the HTTP status a request would get, seconds to wait (0: none said)]. */
export type RefusedEntry = [number, number, number];

export type WatchServerFrame =
  | { t: 'changes'; ack: number; set: Array<[number, string, TokenAuthorizerResponse]>; gone: number[]; refused?: RefusedEntry[] }
  | { t: 'beat'; ack: number };

export const isWatchId = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

const shortText = (v: unknown, max: number): v is string => typeof v === 'string' && v.length <= max;

function isReported(e: unknown, denial: boolean): e is ReportedEntry {
  return (
    Array.isArray(e) &&
    e.length === (denial ? 7 : 6) &&
    isWatchId(e[0]) &&
    shortText(e[1], 32) &&
    (e[2] === null || shortText(e[2], MAX_REPORTED_SEGMENT)) &&
    shortText(e[3], 16) &&
    shortText(e[4], 64) &&
    shortText(e[5], 64) &&
    (!denial || (Number.isSafeInteger(e[6]) && (e[6] as number) > 0))
  );
}

function parseReport(f: Record<string, unknown>): ReportFrame | string {
  if (!shortText(f.client, 128) || f.client === '') return 'report: client must be a name of 1 to 128 characters';
  if (!Array.isArray(f.denied) || !Array.isArray(f.allowed)) return 'report: denied and allowed must be arrays';
  if (f.denied.length + f.allowed.length > MAX_REPORTED) return `report: at most ${MAX_REPORTED} entries`;
  if (!isWatchId(f.unknown) || !isWatchId(f.dropped)) return 'report: unknown and dropped must be whole numbers';
  if (!f.denied.every((e) => isReported(e, true)) || !f.allowed.every((e) => isReported(e, false)))
    return 'report: each entry is [id, resource, segment, access, partition, namespace], and a denial its count';
  return f as unknown as ReportFrame;
}

/** A client's frame checked, or why it cannot be taken (each reason fits a WebSocket close frame: 123 bytes). */
export function parseClientFrame(text: string): WatchClientFrame | string {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return 'a frame that is not JSON';
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return 'a frame that is not an object';
  const f = raw as Record<string, unknown>;
  switch (f.t) {
    case 'watch': {
      if (!isWatchId(f.seq)) return 'watch: seq must be a whole number';
      if (!Array.isArray(f.add) || f.add.length > MAX_ADD) return `watch: add must be an array of at most ${MAX_ADD} entries`;
      for (const e of f.add) {
        if (!Array.isArray(e) || e.length !== 3 || !isWatchId(e[0]) || !shortText(e[1], MAX_SECRET) || !shortText(e[2], MAX_HASH))
          return 'watch: each entry is [id, secret, hash]: a whole number, a secret of at most 256 characters, a hash of at most 64';
      }
      return f as WatchClientFrame;
    }
    case 'report':
      return parseReport(f);
    case 'unwatch':
    case 'used':
      if (!Array.isArray(f.ids) || f.ids.length > MAX_WATCHED || !f.ids.every(isWatchId))
        return `${f.t}: ids must be an array of whole numbers`;
      return f as WatchClientFrame;
    default:
      return `unknown frame type ${JSON.stringify(String(f.t)).slice(0, 40)}`;
  }
}

/** A server's frame as the client reads it (the views in `set` are checked one by one, by their schema), or undefined. */
export function parseServerFrame(text: string): WatchServerFrame | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (v === null || typeof v !== 'object') return undefined;
  const f = v as Record<string, unknown>;
  if (!Number.isSafeInteger(f.ack)) return undefined;
  if (f.t === 'beat') return f as WatchServerFrame;
  if (f.t !== 'changes' || !Array.isArray(f.set) || !Array.isArray(f.gone)) return undefined;
  if (f.refused !== undefined && !(Array.isArray(f.refused) && f.refused.every(isRefused))) return undefined;
  return f as WatchServerFrame;
}

const isRefused = (e: unknown): e is RefusedEntry =>
  Array.isArray(e) &&
  e.length === 3 &&
  isWatchId(e[0]) &&
  Number.isSafeInteger(e[1]) &&
  (e[1] as number) >= 400 &&
  (e[1] as number) <= 599 &&
  typeof e[2] === 'number' &&
  Number.isFinite(e[2]) &&
  (e[2] as number) >= 0;
