import type { TokenRecord } from '../domain/types.js';
import type { StateReader, TokenQuery } from '../store/store.js';
import { type Page, pageAnswer } from './paging.js';
import { JSONStream, JSONText } from './views.js';

/** Tokens a whole list's index holds above which it is sent as it is made (a JSONStream) rather than made whole first. */
const STREAM_ABOVE = 10_000;
/** Tokens a streamed list makes at a time. */
const STREAM_PAGE = 1_000;

/** How a list shows its tokens: which the caller sees, and each one's JSON. */
export interface ListedTokens {
  shown(t: TokenRecord): boolean;
  /** The view of a token of a whole list of few (kept decoded; its view cached with it). */
  view(t: TokenRecord): JSONText;
  /** The view of a token of a page or a stream, read for a moment: made, not kept. */
  viewOnce(t: TokenRecord): JSONText;
}

/**
 * The token list's answer (docs/http-api.md, "Paged lists"): a page of it (`page`), the whole
 * list, or, when the list's index holds many tokens, the whole list sent as it is made. `asked`:
 * the index the list was asked at.
 */
export function tokenListAnswer(
  reader: StateReader,
  query: TokenQuery,
  page: Page | undefined,
  asked: number,
  tokens: ListedTokens,
): JSONText | JSONStream {
  /** Up to `limit` views of what `walk` holds that the caller sees; `more` when another one follows. */
  const collect = (walk: Iterable<TokenRecord>, limit: number, view = tokens.viewOnce) => {
    const parts: JSONText[] = [];
    let last: string | undefined;
    for (const t of walk) {
      if (!tokens.shown(t)) continue;
      if (parts.length === limit) return { parts, last, more: true };
      parts.push(view(t));
      last = t.AccessorID;
    }
    return { parts, last, more: false };
  };
  if (page !== undefined) {
    // A page walks the query's index in AccessorID order from the cursor: one more than the page says whether more remain.
    const { parts, last, more } = collect(reader.tokensInOrder(query, page.after), page.perPage);
    return pageAnswer('tokens', JSONText.array(parts), more ? last : undefined);
  }
  // A list whose index holds few tokens (a filter's: ten tokens of a policy) is made whole, as it always was.
  if (reader.tokensWalked(query) <= STREAM_ABOVE)
    return JSONText.array(collect(reader.listTokens(query), Number.POSITIVE_INFINITY, tokens.view).parts);
  // Many tokens: the whole list is sent as it is made, a page at a time, never held whole. One walk
  // of the index as it stood when the list was asked for (the order was taken then, not again for each
  // page); a token made since, which may sit in a slot another left, is not in it.
  return new JSONStream(function* () {
    const walk = reader.tokensInOrder(query, undefined);
    const made = (function* () {
      for (const t of walk) if (t.CreateIndex <= asked) yield t;
    })();
    for (;;) {
      const batch: TokenRecord[] = [];
      for (let n = made.next(); !n.done; n = made.next()) {
        batch.push(n.value);
        if (batch.length === STREAM_PAGE) break;
      }
      if (batch.length === 0) return;
      yield collect(batch, Number.POSITIVE_INFINITY).parts;
    }
  });
}
