import { invalid } from './errors.js';
import { formatDuration } from './duration.js';

export interface ExpiryLimits {
  /** Shortest allowed lifetime from now, ms (token-min-ttl). */
  minTTL: number;
  /** Longest allowed lifetime from now, ms (token-max-ttl). */
  maxTTL: number;
}

/** True when the token's expiration time has passed at `now`. */
export function isExpired(token: { ExpirationTime?: string }, now: number): boolean {
  return token.ExpirationTime !== undefined && Date.parse(token.ExpirationTime) <= now;
}

/** Milliseconds since the epoch of an expiration time, or undefined when there is none. */
export const expiryMillis = (token: { ExpirationTime?: string }): number | undefined =>
  token.ExpirationTime === undefined ? undefined : Date.parse(token.ExpirationTime);

/**
 * The expiration time of a token being created, from ExpirationTTL (ms) or ExpirationTime
 * (ms since epoch), checked against the configured window. Returns undefined for a token
 * that never expires. Messages are Consul's.
 */
export function resolveExpiration(input: { ttl?: number; time?: number }, now: number, limits: ExpiryLimits): number | undefined {
  let expires: number | undefined = input.time;
  if (input.ttl !== undefined && input.ttl !== 0) {
    if (input.ttl < 0) throw invalid(`Token Expiration TTL '${formatDuration(input.ttl)}' should be > 0`);
    if (input.time !== undefined) throw invalid('Token Expiration TTL and Expiration Time cannot both be set');
    expires = now + input.ttl;
  }
  if (expires === undefined) return undefined;
  if (expires < now) throw invalid('ExpirationTime cannot be before CreateTime');
  const expiresIn = expires - now;
  if (expiresIn > limits.maxTTL) {
    throw invalid(`ExpirationTime cannot be more than ${formatDuration(limits.maxTTL)} in the future (was ${formatDuration(expiresIn)})`);
  }
  if (expiresIn < limits.minTTL) {
    throw invalid(`ExpirationTime cannot be less than ${formatDuration(limits.minTTL)} in the future (was ${formatDuration(expiresIn)})`);
  }
  return expires;
}

/** RFC 3339 in UTC with millisecond precision. */
export const rfc3339 = (ms: number): string => new Date(ms).toISOString();
