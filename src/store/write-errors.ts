import { WatchwordError } from '../domain/errors.js';

/** The text of a write error's cause, as operators read it (ENOSPC, EIO…). */
export function causeText(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { message?: string; code?: string } };
  const inner = e?.cause?.message ?? e?.message ?? String(err);
  return inner.replace(/^IO error: /, '');
}

/** A write refused because the disk failed one (503 STORE_UNAVAILABLE). */
export function storeUnavailable(err: unknown, recovering: boolean): WatchwordError {
  const suffix = recovering ? '; retrying until the disk accepts writes again' : '';
  return new WatchwordError('STORE_UNAVAILABLE', `store write failed: ${causeText(err)}${suffix}`, { cause: err });
}
