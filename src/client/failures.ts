import { WatchwordApiError } from './client.js';

// The enforcing client's small parts: durations, secrets it will send, and what a failed
// request means (only an unreachable daemon lets the down policy speak).

export function milliseconds(value: number | string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value === 'number') return value;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(value.trim());
  if (!m) throw new TypeError(`tokenTTL: expected milliseconds or a duration like "30s", got ${JSON.stringify(value)}`);
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms'];
}

/**
 * Why a request for a token's rules got no usable answer:
 * - `unreachable`: the daemon could not be reached or cannot answer now (connection refused or
 *   reset, a timeout, a 5xx): the only case `down_policy` speaks for;
 * - `limited`: the daemon answered 429 (a rate limit or the blocking cap): it is up, so nothing is
 *   allowed on its account; a known token keeps its rules and is asked again after `Retry-After`;
 * - `broken`: the request could not be made or the answer not understood (a bug or a hostile
 *   peer, not an outage): denied.
 */
export type Failure = 'unreachable' | 'limited' | 'broken';

/** Network errors below HTTP that mean "the daemon is not there now" (Node's and undici's codes). */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
]);

/** What an HTTP status other than 2xx and 403 means for a token's rules. */
export const failureOfStatus = (status: number): Failure => (status === 429 ? 'limited' : status >= 500 ? 'unreachable' : 'broken');

export function failureOf(err: unknown): Failure {
  if (err instanceof WatchwordApiError) return failureOfStatus(err.status);
  // Our own time limit on the request (AbortSignal.timeout).
  if (err instanceof Error && err.name === 'TimeoutError') return 'unreachable';
  return networkCode(err) !== undefined ? 'unreachable' : 'broken';
}

/** The network error code (NETWORK_CODES) in an error or its causes, if there is one. */
function networkCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return code;
  }
  return undefined;
}

/** Why a request failed, for the `'down'` event: a code or a message, never a secret (none is in either). */
export function reasonOf(err: unknown): string {
  if (err instanceof WatchwordApiError) return `HTTP ${err.status}`;
  const code = networkCode(err);
  if (code !== undefined) return code;
  return err instanceof Error && err.name === 'TimeoutError' ? 'timed out' : 'unreachable';
}

/**
 * A secret this client will send: printable ASCII without spaces, at most 256 characters (what
 * a header can carry and the daemon accepts). Anything else is denied without a request, so no
 * input can make the request fail in a way that looks like an outage.
 */
export const WELL_FORMED_SECRET = /^[\x21-\x7e]{1,256}$/;

export const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
