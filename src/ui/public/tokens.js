// Tokens: the list with its filters and search, the detail with effective policies and a
// permission test, and one form for create and edit that keeps every field of the token.
import { useState } from 'preact/hooks';
import {
  ErrorBox,
  HIDDEN,
  Loading,
  ReasonView,
  Secret,
  Time,
  api,
  apiPage,
  apiPath,
  confirmThen,
  explain,
  go,
  html,
  identities,
  SECRET_KEY,
  state,
  useLoad,
} from './lib.js';
import { CheckFields, UNSEGMENTED } from './insight.js';
import {
  CheckField,
  LinkChecks,
  MODELS,
  Messages,
  NodeIdentities,
  SaveBar,
  ServiceIdentities,
  TemplatedPolicies,
  TextField,
  useChoices,
  useRecordForm,
} from './forms.js';

const isSelf = (t) => state.self?.AccessorID === t.AccessorID;
const You = () => html` <span class="badge you" data-testid="you" title="The token you signed in with">you</span>`;

/** Tokens a page of the list shows (the API's paged lists: docs/http-api.md, "Paged lists"). */
const PAGE_SIZE = 100;

/** The list's "Unused for" choices: `?unused-since=` durations (docs/http-api.md, "Last use"). */
const UNUSED_LABELS = { '1h': 'an hour', '24h': 'a day', '168h': 'a week', '720h': '30 days', '2160h': '90 days' };

export function TokenList() {
  const [filter, setFilter] = useState({ kind: 'policy', value: '' });
  const [search, setSearch] = useState('');
  const [scope, setScope] = useState('');
  const [unused, setUnused] = useState('');
  const policies = useLoad(() => api('GET', '/v1/acl/policies'), []);
  const roles = useLoad(() => api('GET', '/v1/acl/roles'), []);
  const methods = useLoad(() => api('GET', '/v1/acl/auth-methods').catch(() => []), []);
  const params = [
    ...(filter.value ? [`${filter.kind}=${encodeURIComponent(filter.value)}`] : []),
    ...(unused ? [`unused-since=${encodeURIComponent(unused)}`] : []),
  ];
  const query = params.length ? `?${params.join('&')}` : '';
  // The cursors of the pages before this one (a new filter starts again from the first).
  const [paging, setPaging] = useState({ query, before: [], cursor: undefined });
  const at = paging.query === query ? paging : { query, before: [], cursor: undefined };
  // Each page remembers its own number: while the next one loads, the rows and the label still say which page they are.
  const number = at.before.length + 1;
  const page = useLoad(
    () => apiPage(`/v1/acl/tokens${query}`, { perPage: PAGE_SIZE, cursor: at.cursor }).then((p) => ({ ...p, number })),
    [query, at.cursor],
  );
  const tokens = { ...page, data: page.data?.items };
  const next = page.data?.next;
  const shownNumber = page.data?.number ?? number;
  const nextPage = () => setPaging({ query, before: [...at.before, at.cursor], cursor: next });
  const previousPage = () => setPaging({ query, before: at.before.slice(0, -1), cursor: at.before[at.before.length - 1] });
  const options = { policy: policies.data ?? [], role: roles.data ?? [], authmethod: methods.data ?? [] };
  const choices =
    filter.kind === 'servicename'
      ? null
      : (options[filter.kind] ?? []).map((o) => ({ value: filter.kind === 'authmethod' ? o.Name : o.ID, label: o.Name }));
  return html`<h1>Tokens</h1>
    <div class="filters">
      <div><label for="filter-kind">Filter by</label>
        <select id="filter-kind" value=${filter.kind} onChange=${(e) => setFilter({ kind: e.target.value, value: '' })}>
          <option value="policy">Policy</option><option value="role">Role</option><option value="servicename">Service name</option><option value="authmethod">Auth method</option>
        </select></div>
      <div><label for="filter-value">${{ policy: 'Policy', role: 'Role', servicename: 'Service name', authmethod: 'Auth method' }[filter.kind]}</label>
        ${
          choices
            ? html`<select id="filter-value" value=${filter.value} onChange=${(e) => setFilter({ ...filter, value: e.target.value })}>
              <option value="">(any)</option>${choices.map((c) => html`<option value=${c.value}>${c.label}</option>`)}</select>`
            : html`<input id="filter-value" value=${filter.value} onChange=${(e) => setFilter({ ...filter, value: e.target.value })} />`
        }</div>
      <div><label for="filter-scope">Scope</label>
        <select id="filter-scope" value=${scope} onChange=${(e) => setScope(e.target.value)}><option value="">(any)</option><option value="local">Local</option><option value="global">global</option></select></div>
      <div><label for="filter-unused">Unused for</label>
        <select id="filter-unused" value=${unused} onChange=${(e) => setUnused(e.target.value)}><option value="">(any)</option>${['1h', '24h', '168h', '720h', '2160h'].map((d) => html`<option value=${d}>${UNUSED_LABELS[d]}</option>`)}</select></div>
      <div><label for="search">Search</label><input id="search" type="search" placeholder="description or accessor" value=${search} onInput=${(e) => setSearch(e.target.value)} /></div>
    </div>
    ${state.canWrite ? html`<div class="actions"><a class="button" href="#/tokens/new">Create token</a></div>` : null}
    <${Loading} result=${tokens}>${(list) => {
      const s = search.toLowerCase();
      const shown = list.filter(
        (t) =>
          (!s || t.AccessorID.includes(s) || (t.Description ?? '').toLowerCase().includes(s)) &&
          (!scope || (scope === 'local') === t.Local),
      );
      return html`<div class="table-wrap"><table data-testid="token-table">
        <thead><tr><th>AccessorID</th><th>Description</th><th>Policies and roles</th><th>Identities</th><th>Scope</th><th>Expires</th><th>Last used</th></tr></thead>
        <tbody>${shown.map(
          (t) => html`<tr class=${isSelf(t) ? 'self' : ''}>
          <td><a href=${`#/tokens/${t.AccessorID}`}>${t.AccessorID}</a>${isSelf(t) ? html`<${You} />` : null}</td>
          <td>${t.Description}</td>
          <td>${[...(t.Policies ?? []).map((p) => p.Name), ...(t.Roles ?? []).map((r) => `role ${r.Name}`)].join(', ') || html`<span class="muted">—</span>`}</td>
          <td>${identities(t).join('; ') || html`<span class="muted">—</span>`}</td>
          <td class="nowrap">${t.Local ? 'Local' : 'global'}${t.AuthMethod ? html` <span class="badge" title="Made by a login">${t.AuthMethod}</span>` : null}</td>
          <td><${Time} value=${t.ExpirationTime} empty="never" /></td>
          <td><${Time} value=${t.LastUsedTime} empty="not seen" /></td>
        </tr>`,
        )}</tbody></table></div>
        <p class="muted">${shown.length} of ${list.length} tokens${
          shownNumber > 1 || next ? ` on page ${shownNumber} (${PAGE_SIZE} a page; search and scope look at this page)` : ''
        }</p>
        ${
          shownNumber > 1 || next
            ? html`<div class="actions" data-testid="token-pages">
              <button type="button" class="secondary" disabled=${page.loading || at.before.length === 0} onClick=${previousPage}>Previous page</button>
              <button type="button" class="secondary" disabled=${page.loading || !next} onClick=${nextPage}>Next page</button></div>`
            : null
        }`;
    }}<//>`;
}

function IdentityList({ title, items }) {
  return html`<dt>${title}</dt><dd>${items.length ? html`<ul class="plain">${items.map((i) => html`<li>${i}</li>`)}</ul>` : '—'}</dd>`;
}

/** How long a rotated-out secret may keep working, as the token page offers it (the API takes any duration up to 24h). */
const ROTATION_OVERLAPS = ['0s', '10m', '1h', '24h'];

export function TokenDetail({ id }) {
  const token = useLoad(() => api('GET', apiPath`/v1/acl/token/${id}?expanded`), [id]);
  const [error, setError] = useState('');
  const clone = async () => {
    try {
      const c = await api('PUT', apiPath`/v1/acl/token/${id}/clone`, { Description: `Clone of ${token.data.Description || id}` });
      go(`#/tokens/${c.AccessorID}`);
    } catch (err) {
      setError(explain(err));
    }
  };
  const [overlap, setOverlap] = useState('10m');
  const rotate = () =>
    confirmThen(
      `Give token ${id} a new secret? ${overlap === '0s' ? 'The old one stops working at once.' : `The old one keeps working for ${overlap}, then nowhere.`}`,
      async () => {
        try {
          const r = await api('PUT', apiPath`/v1/acl/token/${id}/rotate`, { Overlap: overlap });
          // This page's own token: sign in with its new secret (the old one would stop with the overlap).
          if (isSelf(r) && r.SecretID !== HIDDEN) {
            state.secret = r.SecretID;
            sessionStorage.setItem(SECRET_KEY, r.SecretID);
          }
          setError('');
          token.reload();
        } catch (err) {
          setError(explain(err));
        }
      },
    );
  const remove = () =>
    confirmThen(`Delete token ${id}? This cannot be undone.`, async () => {
      try {
        await api('DELETE', apiPath`/v1/acl/token/${id}`);
        go('#/tokens');
      } catch (err) {
        setError(explain(err));
      }
    });
  return html`<${Loading} result=${token}>${(t) => html`
    <h1>Token ${t.Description ? `“${t.Description}”` : t.AccessorID}${isSelf(t) ? html`<${You} />` : null}</h1>
    <${ErrorBox} message=${error} />
    ${
      state.canWrite
        ? html`<div class="actions">
          <a class="button secondary" href=${`#/tokens/${id}/edit`}>Edit</a>
          <button type="button" class="secondary" onClick=${clone}>Clone</button>
          <span class="rotate" data-testid="rotate"><label class="rotate-label" for="rotate-overlap">old secret works for</label>
            <select id="rotate-overlap" value=${overlap} onChange=${(e) => setOverlap(e.target.value)}>${ROTATION_OVERLAPS.map((o) => html`<option value=${o}>${o === '0s' ? 'no overlap' : o}</option>`)}</select>
            <button type="button" class="secondary" onClick=${rotate}>Rotate secret</button></span>
          ${isSelf(t) ? null : html`<button type="button" class="danger" onClick=${remove}>Delete</button>`}</div>`
        : null
    }
    <dl class="kv">
      <dt>AccessorID</dt><dd>${t.AccessorID}</dd>
      <dt>SecretID</dt><dd><${Secret} value=${t.SecretID} /></dd>
      ${Date.parse(t.PreviousSecretExpirationTime ?? '') > Date.now() ? html`<dt>Old secret</dt><dd data-testid="old-secret">rotated; the old one stops working <${Time} value=${t.PreviousSecretExpirationTime} /></dd>` : null}
      <dt>Description</dt><dd>${t.Description || html`<span class="muted">—</span>`}</dd>
      <dt>Scope</dt><dd>${t.Local ? 'Local (this datacenter only)' : 'global'}</dd>
      <dt>Namespace</dt><dd>${t.Namespace} / ${t.Partition}</dd>
      ${t.AuthMethod ? html`<dt>Auth method</dt><dd>${t.AuthMethod}</dd>` : null}
      <dt>Expires</dt><dd><${Time} value=${t.ExpirationTime} empty="never" /></dd>
      <dt>Created</dt><dd><${Time} value=${t.CreateTime} /></dd>
      <dt>Last used</dt><dd><${Time} value=${t.LastUsedTime} empty="not seen (or before last use was recorded)" /></dd>
      <dt>Policies</dt><dd>${(t.Policies ?? []).map((p, i) => html`${i ? ', ' : ''}<a href=${`#/policies/${p.ID}`}>${p.Name}</a>`)}${(t.Policies ?? []).length ? null : '—'}</dd>
      <dt>Roles</dt><dd>${(t.Roles ?? []).map((r, i) => html`${i ? ', ' : ''}<a href=${`#/roles/${r.ID}`}>${r.Name}</a>`)}${(t.Roles ?? []).length ? null : '—'}</dd>
      <${IdentityList} title="Identities and templates" items=${identities(t)} />
      <dt>Audit</dt><dd><a href=${`#/audit?accessor=${t.AccessorID}`} data-testid="audit-by">what this token did</a>, <a href=${`#/audit?kind=token&id=${t.AccessorID}`} data-testid="audit-of">changes to it</a></dd>
    </dl>
    <h2>Effective policies</h2>
    <div data-testid="effective-policies">${(t.ExpandedPolicies ?? []).map((p) => html`<section><h3>${p.Name}</h3>${p.Datacenters?.length ? html`<p class="muted">Only in ${p.Datacenters.join(', ')}</p>` : null}<pre>${p.Rules}</pre></section>`)}</div>
    ${(t.ExpandedRoles ?? []).length > 0 ? html`<h2>Roles</h2><ul>${t.ExpandedRoles.map((r) => html`<li>${r.Name}: ${(r.Policies ?? []).map((p) => p.Name).join(', ')}</li>`)}</ul>` : null}
    ${t.SecretID && t.SecretID !== HIDDEN ? html`<${PermissionTest} secret=${t.SecretID} />` : null}`}<//>`;
}

/** "Test a permission": may this token do this, and why? Asked with the token's own secret. */
function PermissionTest({ secret }) {
  const [check, setCheck] = useState({ Resource: 'service', Segment: '', Access: 'read' });
  const [answer, setAnswer] = useState(undefined);
  const [error, setError] = useState('');
  const segmented = !UNSEGMENTED.has(check.Resource);
  const ask = async (e) => {
    e.preventDefault();
    setError('');
    setAnswer(undefined);
    try {
      const body = [{ Resource: check.Resource, ...(segmented ? { Segment: check.Segment } : {}), Access: check.Access }];
      const [a] = await api('POST', '/v1/internal/acl/authorize?explain', body, { secret });
      setAnswer(a);
    } catch (err) {
      setError(explain(err));
    }
  };
  return html`<h2>Test a permission</h2>
    <form class="filters" data-testid="permission-test" onSubmit=${ask}>
      <${CheckFields} idPrefix="perm" check=${check} onChange=${(c) => {
        setAnswer(undefined);
        setCheck(c);
      }} />
      <div><button type="submit">Check</button></div>
    </form>
    <${ErrorBox} message=${error} />
    ${
      answer === undefined
        ? null
        : html`<p data-testid="permission-answer" class=${answer.Allow ? 'allow' : 'deny'}><strong>${answer.Allow ? 'allow' : 'deny'}</strong>: this token ${answer.Allow ? 'may' : 'may not'} ${check.Access} ${check.Resource}${segmented ? ` “${check.Segment}”` : ''}</p>
      <${ReasonView} reason=${answer.Reason} />`
    }`;
}

const NEW_TOKEN = { Description: '', Local: false, ExpirationTTL: '' };

export function TokenForm({ id }) {
  const model = MODELS.token;
  const form = useRecordForm(model, id === undefined ? undefined : () => api('GET', apiPath`/v1/acl/token/${id}`), NEW_TOKEN, [id]);
  const choices = useChoices();
  const { draft, set, editing } = form;
  const submit = async (e) => {
    e.preventDefault();
    const t = await form.save((body) => (editing ? api('PUT', apiPath`/v1/acl/token/${id}`, body) : api('PUT', '/v1/acl/token', body)));
    if (t) go(`#/tokens/${t.AccessorID}`);
  };
  if (draft === undefined)
    return html`<h1>Edit token</h1><${Messages} form=${form} />${form.error ? null : html`<p class="muted">Loading…</p>`}`;
  return html`<h1>${editing ? `Edit token ${draft.Description ? `“${draft.Description}”` : id}` : 'Create token'}</h1>
    <form onSubmit=${submit} data-testid="token-form">
      ${editing ? html`<p class="muted">AccessorID ${draft.AccessorID}${draft.AuthMethod ? `, made by a login to ${draft.AuthMethod}` : ''}${draft.ExpirationTime ? html`, expires <${Time} value=${draft.ExpirationTime} />` : ''}</p>` : null}
      <${TextField} id="t-desc" label="Description" value=${draft.Description} onValue=${(v) => set('Description', v)} />
      <${LinkChecks} label="Policies" all=${choices.policies} value=${draft.Policies} onValue=${(v) => set('Policies', v)} />
      <${LinkChecks} label="Roles" all=${choices.roles} value=${draft.Roles} onValue=${(v) => set('Roles', v)} />
      <${ServiceIdentities} id="t-si" value=${draft.ServiceIdentities} local=${draft.Local} onValue=${(v) => set('ServiceIdentities', v)} />
      <${NodeIdentities} id="t-ni" value=${draft.NodeIdentities} onValue=${(v) => set('NodeIdentities', v)} />
      <${TemplatedPolicies} id="t-tp" value=${draft.TemplatedPolicies} templates=${choices.templates} onValue=${(v) => set('TemplatedPolicies', v)} />
      ${editing ? null : html`<${TextField} id="t-ttl" label="Expires after" placeholder="e.g. 1h; empty: never" value=${draft.ExpirationTTL} onValue=${(v) => set('ExpirationTTL', v)} />`}
      <${CheckField} id="t-local" label="Local to this datacenter" checked=${draft.Local} disabled=${editing} onValue=${(v) => set('Local', v)}
        hint=${editing ? 'A token stays Local or global for its whole life.' : 'A Local token never leaves the datacenter that made it.'} />
      <${Messages} form=${form} />
      <${SaveBar} form=${form} cancel=${editing ? `#/tokens/${id}` : '#/tokens'} />
    </form>`;
}
