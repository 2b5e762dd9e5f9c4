// Quotas: how many tokens an auth method, a namespace or a partition may hold, and how long they
// may live (docs/http-api.md, "Quotas"); the list shows each quota's use against its limit.
import { useState } from 'preact/hooks';
import { Loading, api, apiPath, confirmThen, explain, go, html, state, useLoad } from './lib.js';
import { CheckField, MODELS, Messages, SaveBar, SelectField, TextField, useRecordForm } from './forms.js';

const SCOPES = [
  { value: 'AuthMethod', label: 'auth method (the tokens its logins made)' },
  { value: 'Namespace', label: 'namespace' },
  { value: 'Partition', label: 'partition' },
];
const SCOPE_WORD = { AuthMethod: 'auth method', Namespace: 'namespace', Partition: 'partition' };

/** The scope a quota names: its kind and name. */
const scopeOf = (q) => {
  const kind = SCOPES.map((s) => s.value).find((k) => q[k]) ?? 'AuthMethod';
  return { kind, name: q[kind] ?? '' };
};

/** How full a quota is, as a bar (none when it has no MaxTokens). */
function UseBar({ q }) {
  if (q.MaxTokens === undefined) return html`<span>${q.Used}</span>`;
  const share = q.MaxTokens === 0 ? 1 : Math.min(1, q.Used / q.MaxTokens);
  const full = q.Used >= q.MaxTokens;
  return html`<span class="use" title=${`${q.Used} of ${q.MaxTokens}`}>
    <svg width="120" height="10" role="img" aria-label=${`${q.Used} of ${q.MaxTokens} tokens`}>
      <rect width="120" height="10" rx="2" fill="var(--line, #ddd)" />
      <rect width=${Math.round(120 * share)} height="10" rx="2" fill=${full ? 'var(--danger, #b00)' : 'var(--accent, #36c)'} />
    </svg> ${q.Used} / ${q.MaxTokens}</span>`;
}

export function Quotas() {
  const list = useLoad(() => api('GET', '/v1/acl/quotas'), []);
  const [error, setError] = useState('');
  const remove = (q) =>
    confirmThen(`Delete quota ${q.Name}? Its scope may then make tokens without limit.`, () =>
      api('DELETE', apiPath`/v1/acl/quota/${q.ID}`).then(list.reload, (err) => setError(explain(err))),
    );
  return html`<h1>Quotas</h1>
    <p class="muted">How many tokens an auth method, a namespace or a partition may hold in this datacenter, and how long they may live. Used counts live tokens (expired ones until the reaper takes them).</p>
    ${state.canWrite ? html`<div class="actions"><a class="button" href="#/quotas/new">Create quota</a></div>` : null}
    ${error ? html`<div class="error" role="alert">${error}</div>` : null}
    <${Loading} result=${list}>${(qs) =>
      qs.length === 0
        ? html`<p class="muted" data-testid="quota-empty">No quotas: every scope may make tokens without limit.</p>`
        : html`<div class="table-wrap"><table data-testid="quota-table"><thead><tr><th>Name</th><th>Scope</th><th>Used</th><th>Max token TTL</th><th>Min token TTL</th><th>Local</th><th></th></tr></thead>
      <tbody>${qs.map((q) => {
        const { kind, name } = scopeOf(q);
        return html`<tr><td><a href=${`#/quotas/${q.ID}`}>${q.Name}</a></td><td>${SCOPE_WORD[kind]} ${name}</td><td><${UseBar} q=${q} /></td>
          <td>${q.MaxTokenTTL ?? '—'}</td><td>${q.MinTokenTTL ?? '—'}</td><td>${q.Local ? 'yes' : 'no'}</td>
          <td>${state.canWrite ? html`<button type="button" class="danger small" onClick=${() => remove(q)}>Delete</button>` : null}</td></tr>`;
      })}</tbody></table></div>`}<//>`;
}

const NEW_QUOTA = { Name: '', Description: '', AuthMethod: '', Local: false };

export function QuotaForm({ id }) {
  const creating = id === 'new';
  const form = useRecordForm(MODELS.quota, creating ? undefined : () => api('GET', apiPath`/v1/acl/quota/${id}`), NEW_QUOTA, [id]);
  const { draft, set, setDraft, editing } = form;
  const ro = !state.canWrite;
  const submit = async (e) => {
    e.preventDefault();
    const q = await form.save((body) => (editing ? api('PUT', apiPath`/v1/acl/quota/${id}`, body) : api('PUT', '/v1/acl/quota', body)));
    if (q) {
      form.setNotice(`Saved quota “${q.Name}”.`);
      if (creating) go(`#/quotas/${q.ID}`);
    }
  };
  // The scope's kind as chosen (a name not typed yet leaves the record no field to tell it by).
  const [chosen, setChosen] = useState(undefined);
  if (draft === undefined)
    return html`<h1>Quota</h1><${Messages} form=${form} />${form.error ? null : html`<p class="muted">Loading…</p>`}`;
  const kind = chosen ?? scopeOf(draft).kind;
  const name = draft[kind] ?? '';
  const setScope = (k, n) => {
    setChosen(k);
    setDraft((d) => ({ ...d, AuthMethod: undefined, Namespace: undefined, Partition: undefined, [k]: n === '' ? undefined : n }));
  };
  const number = (v) => (v === '' ? undefined : Number(v));
  return html`<h1>${creating ? 'Create quota' : `Quota “${draft.Name}”`}</h1>
    ${editing ? html`<p data-testid="quota-used">Used: <${UseBar} q=${draft} /></p>` : null}
    <form onSubmit=${submit} data-testid="quota-form">
      <${TextField} id="q-name" label="Name" value=${draft.Name} readOnly=${ro} onValue=${(v) => set('Name', v)} />
      <${TextField} id="q-desc" label="Description" value=${draft.Description} readOnly=${ro} onValue=${(v) => set('Description', v)} />
      <${SelectField} id="q-scope" label="Scope" value=${kind} options=${SCOPES} disabled=${ro} onValue=${(k) => setScope(k, name)} />
      <${TextField} id="q-scope-name" label=${`Name of the ${SCOPE_WORD[kind]}`} value=${name} readOnly=${ro} onValue=${(v) => setScope(kind, v)} />
      <${TextField} id="q-max" label="Max tokens (empty: no limit)" type="number" value=${draft.MaxTokens === undefined ? '' : String(draft.MaxTokens)} readOnly=${ro} onValue=${(v) => set('MaxTokens', number(v))} />
      <${TextField} id="q-max-ttl" label="Max token TTL (a token made without an expiry gets this one)" placeholder="e.g. 24h" value=${draft.MaxTokenTTL} readOnly=${ro} onValue=${(v) => set('MaxTokenTTL', v === '' ? undefined : v)} />
      <${TextField} id="q-min-ttl" label="Min token TTL" placeholder="e.g. 10m" value=${draft.MinTokenTTL} readOnly=${ro} onValue=${(v) => set('MinTokenTTL', v === '' ? undefined : v)} />
      <${CheckField} id="q-local" label="Local: this datacenter only, counting its Local tokens" checked=${draft.Local} disabled=${editing || ro} onValue=${(v) => set('Local', v)} />
      <${Messages} form=${form} />
      ${ro ? null : html`<${SaveBar} form=${form} cancel="#/quotas" />`}
    </form>`;
}
