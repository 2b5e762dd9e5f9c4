// The audit page: this server's recent audit events, newest first, filtered by accessor, type,
// object kind and object, with "Older events" following the endpoint's cursor. The filters live
// in the route (`#/audit?accessor=…`) so a token's page can link to what that token did.
import { useState } from 'preact/hooks';
import { ErrorBox, Loading, Time, api, explain, go, html, useLoad } from './lib.js';
import { SelectField, TextField } from './forms.js';
// The server's list of event types (src/domain/audit-types.ts), one for the emitters, this page and docs/audit.md.
import { AUDIT_KINDS as KINDS, AUDIT_TYPES as TYPES } from './audit-types.js';

const FILTERS = ['accessor', 'type', 'kind', 'id'];

/** What an event changed, in a few words: the objects it touched, or why it was refused. */
function Change({ e }) {
  if (e.Type === 'refused')
    return html`<span class="error-text">${e.Code ?? ''}</span> ${e.Reason ?? ''}${
      // Refusals past a client's burst are counted: one line stands for Count of them.
      e.Count ? html` <span class="badge">×${e.Count} from ${e.RemoteAddr}, ${e.First} to ${e.Last}</span>` : ''
    }`;
  const parts = [];
  for (const o of e.Objects ?? []) {
    const href = o.Deleted ? undefined : linkOf(o);
    const label = `${o.Kind} ${o.ID}${o.Deleted ? ' (deleted)' : ''}`;
    parts.push(href ? html`<a href=${href}>${label}</a>` : html`<span>${label}</span>`);
  }
  if (e.AuthMethod) parts.push(html`<span>auth method ${e.AuthMethod}</span>`);
  if (e.BindingRules?.length) parts.push(html`<span>rules ${e.BindingRules.join(', ')}</span>`);
  if (e.Counts)
    parts.push(
      html`<span>${Object.entries(e.Counts)
        .map(([k, v]) => `${v} ${k}`)
        .join(', ')}</span>`,
    );
  if (e.Role) parts.push(html`<span>${e.Role}${e.Term !== undefined ? ` in term ${e.Term}` : ''}</span>`);
  if (e.Secondary || e.Primary) parts.push(html`<span>${e.Secondary ? `secondary ${e.Secondary}` : `primary ${e.Primary}`}</span>`);
  if (e.Changed?.length) parts.push(html`<span>changed ${e.Changed.join(', ')}</span>`);
  // An enforcing client's report: who reported, and what it denied (the most frequent first).
  if (e.Type === 'denied-by-client') {
    parts.push(
      html`<span>${e.Client ?? 'a client'} denied ${e.Count ?? 0}${e.UnknownSecrets ? ` (${e.UnknownSecrets} without a known token)` : ''}</span>`,
    );
    for (const d of (e.Denials ?? []).slice(0, 5))
      parts.push(
        html`<span>${d.Count}× <code>${d.Resource}${d.Segment ? ` "${d.Segment}"` : ''}:${d.Access}</code> by token ${d.AccessorID}</span>`,
      );
    if ((e.Denials ?? []).length > 5 || e.NotListed) parts.push(html`<span class="muted">and more (${e.NotListed ?? 0} not listed)</span>`);
  }
  if (parts.length === 0) return html`<span class="muted">—</span>`;
  return html`<ul class="plain">${parts.map((p) => html`<li>${p}</li>`)}</ul>`;
}

function linkOf(o) {
  if (o.Kind === 'token') return `#/tokens/${encodeURIComponent(o.ID)}`;
  if (o.Kind === 'policy') return `#/policies/${encodeURIComponent(o.ID)}`;
  if (o.Kind === 'role') return `#/roles/${encodeURIComponent(o.ID)}`;
  if (o.Kind === 'auth-method') return `#/auth-methods/${encodeURIComponent(o.ID)}`;
  if (o.Kind === 'binding-rule') return `#/binding-rules/${encodeURIComponent(o.ID)}`;
  return undefined;
}

function Caller({ e }) {
  const id = e.AccessorID ?? '';
  const known = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id);
  return html`${known ? html`<a href=${`#/tokens/${id}`}>${id}</a>` : html`<span title=${id.startsWith('hmac:') ? 'A secret no token has, named by its HMAC' : ''}>${id}</span>`}
    ${e.RemoteAddr ? html`<div class="muted">${e.RemoteAddr}</div>` : null}`;
}

/** The filters as the route's query, so that a reload or a shared link shows the same events. */
function routeOf(filter) {
  const q = new URLSearchParams();
  for (const k of FILTERS) if (filter[k]) q.set(k, filter[k]);
  const s = q.toString();
  return `#/audit${s ? `?${s}` : ''}`;
}

export function Audit({ query }) {
  const applied = Object.fromEntries(FILTERS.map((k) => [k, query.get(k) ?? '']));
  const [draft, setDraft] = useState(applied);
  const [older, setOlder] = useState({ events: [], next: undefined, error: '' });
  const q = new URLSearchParams({ limit: '50' });
  for (const k of FILTERS) if (applied[k]) q.set(k, applied[k]);
  const page = useLoad(async () => {
    setOlder({ events: [], next: undefined, error: '' });
    return api('GET', `/v1/operator/audit?${q}`);
  }, [q.toString()]);
  const more = async (cursor) => {
    const next = new URLSearchParams(q);
    next.set('cursor', cursor);
    try {
      const r = await api('GET', `/v1/operator/audit?${next}`);
      setOlder((o) => ({ events: [...o.events, ...r.Events], next: r.NextCursor, error: '' }));
    } catch (err) {
      setOlder((o) => ({ ...o, error: explain(err) }));
    }
  };
  const set = (k) => (v) => setDraft({ ...draft, [k]: v });
  return html`<h1>Audit</h1>
    <p class="muted">Who changed what, when and from where, and who was refused, as this server recorded it (newest first).</p>
    <form class="filters" data-testid="audit-filters" onSubmit=${(e) => {
      e.preventDefault();
      go(routeOf(draft));
    }}>
      <${TextField} id="audit-accessor" label="Accessor" value=${draft.accessor} onValue=${set('accessor')} placeholder="AccessorID, anonymous or hmac:…" />
      <${SelectField} id="audit-type" label="Type" value=${draft.type} onValue=${set('type')} options=${[{ value: '', label: '(any)' }, ...TYPES.map((t) => ({ value: t, label: t }))]} />
      <${SelectField} id="audit-kind" label="Object kind" value=${draft.kind} onValue=${set('kind')} options=${[{ value: '', label: '(any)' }, ...KINDS.map((k) => ({ value: k, label: k }))]} />
      <${TextField} id="audit-id" label="Object" value=${draft.id} onValue=${set('id')} placeholder="ID or auth method name" />
      <div class="filter-actions"><button type="submit">Filter</button>
        <button type="button" class="secondary" onClick=${() => {
          setDraft(Object.fromEntries(FILTERS.map((k) => [k, ''])));
          go('#/audit');
        }}>Clear</button></div>
    </form>
    <${Loading} result=${page}>${(r) => {
      const events = [...r.Events, ...older.events];
      const next = older.events.length > 0 ? older.next : r.NextCursor;
      return html`<div class="table-wrap"><table data-testid="audit-table">
        <thead><tr><th>Time</th><th>Type</th><th>Caller</th><th>Request</th><th>Status</th><th>What</th></tr></thead>
        <tbody>${events.map(
          (e) => html`<tr data-type=${e.Type}>
          <td class="nowrap"><${Time} value=${e.Time} /></td>
          <td><span class=${`badge${e.Type === 'refused' ? ' bad' : ''}`}>${e.Type}</span></td>
          <td><${Caller} e=${e} /></td>
          <td>${e.Method ? html`<code>${e.Method} ${e.Path}</code>` : html`<span class="muted">—</span>`}</td>
          <td>${e.Status}</td>
          <td><${Change} e=${e} /></td></tr>`,
        )}</tbody></table></div>
        ${events.length === 0 ? html`<p class="muted" data-testid="audit-empty">No events match.</p>` : html`<p class="muted">${events.length} ${events.length === 1 ? 'event' : 'events'} shown</p>`}
        <${ErrorBox} message=${older.error} />
        ${next ? html`<div class="actions"><button type="button" class="secondary" data-testid="audit-older" onClick=${() => more(next)}>Older events</button></div>` : null}`;
    }}<//>`;
}
