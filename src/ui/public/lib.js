// Shared by every page of the web UI: the session (secret and datacenter, in this tab's
// sessionStorage), API calls with the secret in X-Service-Token only, errors in plain
// words, the hash router, data loading, readable times and small widgets.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';

export const html = htm.bind(h);

export const SECRET_KEY = 'watchword.secret';
export const DC_KEY = 'watchword.dc';
export const HIDDEN = '<hidden>';

export const state = {
  secret: sessionStorage.getItem(SECRET_KEY) ?? '',
  dc: sessionStorage.getItem(DC_KEY) ?? '',
  localDC: '',
  canWrite: false,
  // What the nav offers (app.js, signIn): the Servers and Audit pages.
  canOperate: false,
  canAudit: false,
  self: undefined,
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** An API call with the signed-in secret (or `secret`); `?dc=` when another datacenter is chosen. */
export async function api(method, path, body, options = {}) {
  return (await apiAnswer(method, path, body, options)).data;
}

/**
 * A page of a paged list (docs/http-api.md, "Paged lists"): its items, and the cursor of the next
 * page (undefined on the last).
 */
export async function apiPage(path, { perPage, cursor }) {
  const sep = path.includes('?') ? '&' : '?';
  const { data, headers } = await apiAnswer(
    'GET',
    `${path}${sep}per_page=${perPage}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
  );
  return { items: data, next: headers.get('x-service-next-cursor') ?? undefined };
}

async function apiAnswer(method, path, body, { dc = state.dc, secret = state.secret } = {}) {
  const url = new URL(path, location.origin);
  if (dc && dc !== state.localDC) url.searchParams.set('dc', dc);
  const headers = { 'X-Service-Token': secret, Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = text;
  }
  if (!res.ok)
    throw new ApiError(
      res.status,
      data?.code ?? res.headers.get('x-service-error-code') ?? '',
      data?.message ?? (typeof data === 'string' && data ? data : res.statusText),
    );
  return { data, headers: res.headers };
}

/**
 * An API path with each value put in as one path segment: encoded whole, dots and slashes too, so
 * no route value (a hash the page was opened with) can climb to another endpoint:
 * apiPath`/v1/acl/role/${id}` with id `../policy/X` asks for a role named that, never policy X.
 */
export function apiPath(strings, ...values) {
  let out = strings[0];
  values.forEach((v, i) => {
    out += encodeURIComponent(String(v)).replace(/\./g, '%2E') + strings[i + 1];
  });
  return out;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether a route's ID is one a token, policy, role or binding rule can have (a UUID). */
export const isObjectID = (id) => typeof id === 'string' && UUID.test(id);

/** An API error in plain words. */
export function explain(err) {
  if (!(err instanceof ApiError)) return `Could not reach watchword: ${err.message}`;
  const what =
    {
      400: 'The request was not accepted',
      403: 'Not allowed',
      404: 'Not found',
      409: 'Already in use',
      429: 'Too many requests; try again in a moment',
      503: 'The service is unavailable right now; try again in a moment',
    }[err.status] ?? `The server answered ${err.status}`;
  return `${what}: ${err.message}`;
}

export const go = (hash) => {
  location.hash = hash;
};

/** The route: `#/tokens/ID/edit?x=y` as ['tokens', 'ID', 'edit'] and its query. */
export function useRoute() {
  const [hash, setHash] = useState(location.hash || '#/tokens');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/tokens');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  const [path, query = ''] = hash.slice(1).split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(query) };
}

/** Loads with `load()` whenever `deps` change; shows errors in plain words. */
export function useLoad(load, deps) {
  const [result, setResult] = useState({ loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setResult((r) => ({ ...r, loading: true }));
    load().then(
      (data) => live && setResult({ data }),
      (err) => live && setResult({ error: explain(err) }),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick, state.dc]);
  return { ...result, reload: () => setTick((t) => t + 1) };
}

export const ErrorBox = ({ message }) => (message ? html`<div class="error" role="alert">${message}</div>` : null);
export const Notice = ({ message }) => (message ? html`<div class="notice" role="status">${message}</div>` : null);

export function Loading({ result, children }) {
  if (result.error) return html`<${ErrorBox} message=${result.error} />`;
  if (result.loading && result.data === undefined) return html`<p class="muted">Loading…</p>`;
  return children(result.data);
}

/** A secret, masked until revealed; `<hidden>` stays hidden. Copying never needs revealing. */
export function Secret({ value }) {
  const [shown, setShown] = useState(false);
  const [copied, setCopied] = useState(false);
  if (!value || value === HIDDEN) return html`<span class="secret muted" data-testid="secret">${HIDDEN}</span>`;
  return html`<span class="secret" data-testid="secret" data-masked=${shown ? 'false' : 'true'}>${shown ? value : '•'.repeat(12)}</span>
    <button type="button" class="secondary small" data-testid="reveal-secret" aria-pressed=${shown} onClick=${() => setShown(!shown)}>${shown ? 'Hide' : 'Show'}</button>
    <button type="button" class="secondary small" data-testid="copy-secret" onClick=${async () => {
      await navigator.clipboard.writeText(value).catch(() => undefined);
      setCopied(true);
    }}>${copied ? 'Copied' : 'Copy'}</button>`;
}

export function confirmThen(message, action) {
  if (window.confirm(message)) action();
}

const UNITS = [
  ['year', 365 * 86_400_000],
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
  ['second', 1000],
];
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });

/** "in 59 minutes", "3 days ago". */
export function fromNow(ms, now = Date.now()) {
  const diff = ms - now;
  for (const [unit, size] of UNITS) {
    if (Math.abs(diff) >= size || unit === 'second') return relative.format(Math.round(diff / size), unit);
  }
  return '';
}

/** A time: relative, with the local date and time beside it and the exact RFC 3339 value on hover. */
export function Time({ value, empty = '—' }) {
  if (!value) return html`<span class="muted">${empty}</span>`;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) return html`<span>${value}</span>`;
  return html`<time datetime=${value} title=${value}>${fromNow(ms)} <span class="muted">(${new Date(ms).toLocaleString()})</span></time>`;
}

/** Text search over a list: the box and the matching items. */
export function useSearch(items, text) {
  const [search, setSearch] = useState('');
  const s = search.trim().toLowerCase();
  const shown = s ? items.filter((i) => text(i).toLowerCase().includes(s)) : items;
  const box = html`<div><label for="search">Search</label><input id="search" type="search" placeholder="name or description" value=${search} onInput=${(e) => setSearch(e.target.value)} /></div>`;
  return [shown, box];
}

/** Identities and templates as short text: `web (dc1, dc2)`, `node1 in dc1`, `builtin/service: api`. */
export function identities(o) {
  const out = [];
  for (const s of o.ServiceIdentities ?? [])
    out.push(`service ${s.ServiceName}${s.Datacenters?.length ? ` (${s.Datacenters.join(', ')})` : ''}`);
  for (const n of o.NodeIdentities ?? []) out.push(`node ${n.NodeName} in ${n.Datacenter}`);
  for (const t of o.TemplatedPolicies ?? []) {
    const name = t.TemplateVariables?.name ?? t.TemplateVariables?.Name;
    out.push(`${t.TemplateName}${name ? `: ${name}` : ''}${t.Datacenters?.length ? ` (${t.Datacenters.join(', ')})` : ''}`);
  }
  return out;
}

/** Whether an ID is one of the built-ins (`00000000-0000-0000-0000-0000000000NN`). */
export const isBuiltinID = (id) => /^00000000-0000-0000-0000-0000000000[0-9a-f]{2}$/.test(id ?? '');

/** Where a rule came from, in words: `policy "web-writers"`, `role "ops" (policy "readers")`, `service identity "web"`. */
export function sourceText(s) {
  if (s.Source === 'default_policy') return 'the default policy';
  if (s.Source === 'role') return `role “${s.Name}”${s.Policy ? ` (policy “${s.Policy.Name}”)` : s.Identity ? ` (${s.Identity})` : ''}`;
  if (s.Source === 'policy' || s.Source === 'global-management') return `policy “${s.Name}”`;
  return `${s.Source} “${s.Name}”`;
}

const sourceHref = (s) =>
  s.Source === 'role' ? `#/roles/${s.ID}` : s.Source === 'policy' || s.Source === 'global-management' ? `#/policies/${s.ID}` : undefined;

/** One rule with its source, linked to the policy or role that holds it. */
function RuleLine({ rule, label }) {
  const href = sourceHref(rule);
  const source = sourceText(rule);
  return html`<div class="reason-line"><span class="muted">${label}</span> ${href && isObjectID(rule.ID) ? html`<a href=${href}>${source}</a>` : source}:
    <code>${rule.Block ? `${rule.Block} { ${rule.Rule} }` : rule.Rule}</code></div>`;
}

/** Why a check was answered as it was (docs/operator-insight.md, "Why a check was denied"): the rule that decided, and the one that lost. */
export function ReasonView({ reason }) {
  if (!reason) return null;
  return html`<div class="reason" data-testid="reason">
    <${RuleLine} rule=${reason} label="decided by" />
    ${reason.Lost ? html`<${RuleLine} rule=${reason.Lost} label="over" />` : null}
  </div>`;
}
