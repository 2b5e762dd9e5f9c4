// Shared by every page of the web UI: the session (secret and datacenter, in this tab's
// sessionStorage), API calls with the secret in X-Service-Token only, errors in plain
// words, the hash router, data loading and small widgets.
import { html, useEffect, useState } from '/ui/vendor/htm/standalone.module.js';

export const SECRET_KEY = 'watchword.secret';
export const DC_KEY = 'watchword.dc';
export const HIDDEN = '<hidden>';

export const state = {
  secret: sessionStorage.getItem(SECRET_KEY) ?? '',
  dc: sessionStorage.getItem(DC_KEY) ?? '',
  localDC: '',
  canWrite: false,
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
export async function api(method, path, body, { dc = state.dc, secret = state.secret } = {}) {
  const url = new URL(path, location.origin);
  if (dc && dc !== state.localDC) url.searchParams.set('dc', dc);
  const headers = { 'X-Service-Token': secret };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = text;
  }
  if (!res.ok) throw new ApiError(res.status, data?.code ?? '', data?.message ?? (typeof data === 'string' ? data : res.statusText));
  return data;
}

/** An API error in plain words. */
export function explain(err) {
  if (!(err instanceof ApiError)) return `Could not reach watchword: ${err.message}`;
  const what = {
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

export function useRoute() {
  const [hash, setHash] = useState(location.hash || '#/tokens');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/tokens');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash.slice(1).split('?')[0].split('/').filter(Boolean);
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

export function Loading({ result, children }) {
  if (result.error) return html`<${ErrorBox} message=${result.error} />`;
  if (result.loading && result.data === undefined) return html`<p class="muted">Loading…</p>`;
  return children(result.data);
}

/** A secret: `<hidden>` stays hidden; a visible one copies with one click. */
export function Secret({ value }) {
  const [copied, setCopied] = useState(false);
  if (!value || value === HIDDEN) return html`<span class="secret muted" data-testid="secret">${HIDDEN}</span>`;
  return html`<span class="secret" data-testid="secret">${value}</span>
    <button type="button" class="secondary" data-testid="copy-secret" onClick=${async () => {
      await navigator.clipboard.writeText(value).catch(() => undefined);
      setCopied(true);
    }}>${copied ? 'Copied' : 'Copy'}</button>`;
}

export function confirmThen(message, action) {
  if (window.confirm(message)) action();
}

// ---- Sign in ----

export function linkChecks(all, chosen, setChosen, name) {
  return html`<div class="checks" role="group" aria-label=${name}>${all.map((o) => html`<label><input type="checkbox" checked=${chosen.includes(o.ID)} onChange=${(e) =>
    setChosen(e.target.checked ? [...chosen, o.ID] : chosen.filter((x) => x !== o.ID))} /> ${o.Name}</label>`)}</div>`;
}
