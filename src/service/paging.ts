import { invalid } from '../domain/errors.js';
import { JSONText } from './views.js';

/**
 * Paged lists (docs/http-api.md, "Paged lists"): `?per_page=N` (1–10,000) answers at most N
 * items, in the list's own order, and `X-Service-Next-Cursor` while more remain; the cursor,
 * passed back as `?cursor=`, is opaque to clients: the list's kind and the key of the last item
 * given, so the next page starts right after it whatever was written meanwhile.
 */

export const MAX_PER_PAGE = 10_000;
export const NEXT_CURSOR_HEADER = 'X-Service-Next-Cursor';

/** The query parameters of a paged list, and what each says (the API reference's words). */
export const PAGE_QUERY_DOCS = {
  per_page: `At most this many items (1-${MAX_PER_PAGE}); X-Service-Next-Cursor then says where the next page starts`,
  cursor: 'X-Service-Next-Cursor of the previous page (with per_page)',
} as const;
export const PAGE_QUERY_NAMES = Object.keys(PAGE_QUERY_DOCS) as Array<keyof typeof PAGE_QUERY_DOCS>;

/** Which list a cursor belongs to. */
export type ListKind = 'tokens' | 'policies' | 'roles';

/** A page asked for: its size, and the key of the last item of the page before (none: the first page). */
export interface Page {
  perPage: number;
  after: string | undefined;
}

/** The page a request asks for, from its `per_page` and `cursor`; undefined for a whole list. 400 on a bad value. */
export function pageOf(kind: ListKind, perPage: string | undefined, cursor: string | undefined): Page | undefined {
  if (perPage === undefined) {
    if (cursor !== undefined) throw invalid('Invalid cursor: a cursor is given only with per_page');
    return undefined;
  }
  const n = /^[0-9]{1,5}$/.test(perPage) ? Number(perPage) : Number.NaN;
  if (!(n >= 1 && n <= MAX_PER_PAGE))
    throw invalid(`Invalid per_page: ${JSON.stringify(perPage)}; it must be a whole number from 1 to ${MAX_PER_PAGE}`);
  return { perPage: n, after: cursor === undefined || cursor === '' ? undefined : afterOf(kind, cursor) };
}

/** The cursor of the page after the one that ends with the item of key `last`. */
export function cursorAfter(kind: ListKind, last: string): string {
  return Buffer.from(`${kind}\u0000${last}`, 'utf8').toString('base64url');
}

function afterOf(kind: ListKind, cursor: string): string {
  const text = /^[A-Za-z0-9_-]{1,2048}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const sep = text.indexOf('\u0000');
  if (sep === -1 || text.slice(0, sep) !== kind) throw invalid(`Invalid cursor: not one the ${kind} list gave`);
  return text.slice(sep + 1);
}

/** A page's answer: its items, and the next page's cursor when more remain. */
export function pageAnswer(kind: ListKind, items: JSONText, next: string | undefined): JSONText {
  return next === undefined ? items : items.withHeaders({ [NEXT_CURSOR_HEADER]: cursorAfter(kind, next) });
}

/**
 * A page of a list already made whole and in order of `keyOf` (the few policies and roles of a
 * datacenter): the items after the cursor's key, at most `page.perPage`.
 */
export function pageOfList<V>(kind: ListKind, items: readonly V[], keyOf: (v: V) => string, page: Page): JSONText {
  const after = page.after;
  let lo = 0;
  let hi = items.length;
  if (after !== undefined)
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (keyOf(items[mid] as V) <= after) lo = mid + 1;
      else hi = mid;
    }
  const slice = items.slice(lo, lo + page.perPage);
  const more = lo + page.perPage < items.length;
  return pageAnswer(kind, new JSONText(JSON.stringify(slice)), more ? keyOf(slice[slice.length - 1] as V) : undefined);
}
