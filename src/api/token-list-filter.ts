/**
 * The token list's filters (`GET /v1/acl/tokens`), declared once for both ends: each one's name
 * in a request's query and what it selects. The route documents and reads them from here, the
 * client sends them from here, and the service takes the decoded form.
 */
export const TOKEN_LIST_FILTERS = {
  policy: { query: 'policy', doc: 'Only tokens linked to this policy ID' },
  role: { query: 'role', doc: 'Only tokens linked to this role ID' },
  servicename: { query: 'servicename', doc: 'Only tokens with a service identity of this name' },
  authmethod: { query: 'authmethod', doc: 'Only tokens created by this auth method' },
  authmethodNamespace: { query: 'authmethod-ns', doc: 'Namespace of the auth method' },
  /** A duration's text ("720h"): docs/http-api.md, "Last use". */
  unusedSince: {
    query: 'unused-since',
    doc: 'Only tokens not used for this long (a duration such as "720h"; never-used ones by their CreateTime)',
  },
} as const;

type Filters = typeof TOKEN_LIST_FILTERS;

/** A token list's filters as a caller gives them; each one absent or its text. */
export type TokenListFilter = { -readonly [K in keyof Filters]?: string };

/** The names the filters take in a request's query. */
export type TokenListQueryName = Filters[keyof Filters]['query'];

const entries = Object.entries(TOKEN_LIST_FILTERS) as Array<[keyof Filters, Filters[keyof Filters]]>;

/** Each filter's query name, in declared order. */
export const tokenListQueryNames = entries.map(([, f]) => f.query);

/** What each query name selects (the API reference's words). */
export const tokenListQueryDocs = Object.fromEntries(entries.map(([, f]) => [f.query, f.doc])) as Record<TokenListQueryName, string>;

/** A filter as a request's query carries it. */
export function tokenListQuery(filter: TokenListFilter): Record<TokenListQueryName, string | undefined> {
  return Object.fromEntries(entries.map(([name, f]) => [f.query, filter[name]])) as Record<TokenListQueryName, string | undefined>;
}

/** A filter read back from a request's query. */
export function tokenListFilterOf(get: (name: TokenListQueryName) => string | undefined): TokenListFilter {
  const filter: TokenListFilter = {};
  for (const [name, f] of entries) {
    const v = get(f.query);
    if (v !== undefined) filter[name] = v;
  }
  return filter;
}
