import type { WatchConnection } from './watch-connection.js';
import type { LookUpOutcome, WatchDeps } from './watch-types.js';

// First look-ups on a version 3 watch (service/authorizer-watch.ts): a secret the server does
// not authenticate now, resolved as a request's token would be before it is answered.

/** A look-up that failed in a way no request would name: answered as a request's 503 would be. */
const CANNOT_ANSWER: LookUpOutcome = { status: 503, retryAfter: 0 };

/**
 * Looks `secret` up for entry `id` of watch frame `seq`, and hands the outcome to `answered`: at
 * once when the server can say, else once it can, the frame waiting for it meanwhile (its
 * acknowledgement comes after the answer). Dropped if the client unwatched the id meanwhile or
 * the watch ended.
 */
export function lookUpEntry(
  deps: Pick<WatchDeps, 'lookUp'>,
  conn: WatchConnection,
  id: number,
  secret: string,
  seq: number,
  answered: (outcome: LookUpOutcome) => void,
): void {
  let outcome: LookUpOutcome | Promise<LookUpOutcome>;
  try {
    outcome = deps.lookUp(secret, conn.address);
  } catch {
    outcome = CANNOT_ANSWER;
  }
  if (!(outcome instanceof Promise)) return answered(outcome);
  conn.looking.set(id, secret);
  const release = conn.hold(seq);
  outcome
    .catch(() => CANNOT_ANSWER)
    .then((o) => {
      if (conn.open && conn.looking.get(id) === secret) {
        conn.looking.delete(id);
        answered(o);
      }
      release();
      conn.flush();
    });
}
