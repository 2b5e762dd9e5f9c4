// Tokens: the list with its filters and search, the detail with effective policies, create, edit, clone, delete.
import { html, useEffect, useState } from '/ui/vendor/htm/standalone.module.js';
import { ErrorBox, HIDDEN, Loading, Secret, api, confirmThen, explain, go, linkChecks, state, useLoad } from './lib.js';

export function TokenList() {
  const [filter, setFilter] = useState({ kind: 'policy', value: '' });
  const [search, setSearch] = useState('');
  const [scope, setScope] = useState('');
  const policies = useLoad(() => api('GET', '/v1/acl/policies'), []);
  const roles = useLoad(() => api('GET', '/v1/acl/roles'), []);
  const methods = useLoad(() => api('GET', '/v1/acl/auth-methods').catch(() => []), []);
  const query = filter.value ? `?${filter.kind}=${encodeURIComponent(filter.value)}` : '';
  const tokens = useLoad(() => api('GET', `/v1/acl/tokens${query}`), [query]);
  const options = { policy: policies.data ?? [], role: roles.data ?? [], authmethod: methods.data ?? [] };
  const choices = filter.kind === 'servicename' ? null : (options[filter.kind] ?? []).map((o) => ({ value: filter.kind === 'authmethod' ? o.Name : o.ID, label: o.Name }));
  return html`<h1>Tokens</h1>
    <div class="filters">
      <div><label for="filter-kind">Filter by</label>
        <select id="filter-kind" value=${filter.kind} onChange=${(e) => setFilter({ kind: e.target.value, value: '' })}>
          <option value="policy">Policy</option><option value="role">Role</option><option value="servicename">Service name</option><option value="authmethod">Auth method</option>
        </select></div>
      <div><label for="filter-value">${{ policy: 'Policy', role: 'Role', servicename: 'Service name', authmethod: 'Auth method' }[filter.kind]}</label>
        ${choices
          ? html`<select id="filter-value" value=${filter.value} onChange=${(e) => setFilter({ ...filter, value: e.target.value })}>
              <option value="">(any)</option>${choices.map((c) => html`<option value=${c.value}>${c.label}</option>`)}</select>`
          : html`<input id="filter-value" value=${filter.value} onChange=${(e) => setFilter({ ...filter, value: e.target.value })} />`}</div>
      <div><label for="filter-scope">Scope</label>
        <select id="filter-scope" value=${scope} onChange=${(e) => setScope(e.target.value)}><option value="">(any)</option><option value="local">Local</option><option value="global">global</option></select></div>
      <div><label for="search">Search</label><input id="search" placeholder="description or accessor" value=${search} onInput=${(e) => setSearch(e.target.value)} /></div>
    </div>
    ${state.canWrite ? html`<div class="actions"><a class="button" href="#/tokens/new">Create token</a></div>` : null}
    <${Loading} result=${tokens}>${(list) => {
      const s = search.toLowerCase();
      const shown = list.filter((t) => (!s || t.AccessorID.includes(s) || (t.Description ?? '').toLowerCase().includes(s)) && (!scope || (scope === 'local') === t.Local));
      return html`<div class="table-wrap"><table data-testid="token-table">
        <thead><tr><th>AccessorID</th><th>Description</th><th>Policies</th><th>Roles</th><th>Scope</th></tr></thead>
        <tbody>${shown.map((t) => html`<tr>
          <td><a href=${`#/tokens/${t.AccessorID}`}>${t.AccessorID}</a></td>
          <td>${t.Description}</td>
          <td>${(t.Policies ?? []).map((p) => p.Name).join(', ')}</td>
          <td>${(t.Roles ?? []).map((r) => r.Name).join(', ')}</td>
          <td>${t.Local ? 'Local' : 'global'}${t.AuthMethod ? html` <span class="badge">${t.AuthMethod}</span>` : null}</td>
        </tr>`)}</tbody></table></div>
        <p class="muted">${shown.length} of ${list.length} tokens</p>`;
    }}<//>`;
}

export function TokenDetail({ id }) {
  const token = useLoad(() => api('GET', `/v1/acl/token/${id}?expanded`), [id]);
  const [error, setError] = useState('');
  const clone = async () => {
    try {
      const c = await api('PUT', `/v1/acl/token/${id}/clone`, { Description: `Clone of ${token.data.Description || id}` });
      go(`#/tokens/${c.AccessorID}`);
    } catch (err) {
      setError(explain(err));
    }
  };
  const remove = () =>
    confirmThen(`Delete token ${id}? This cannot be undone.`, async () => {
      try {
        await api('DELETE', `/v1/acl/token/${id}`);
        go('#/tokens');
      } catch (err) {
        setError(explain(err));
      }
    });
  return html`<${Loading} result=${token}>${(t) => html`
    <h1>Token ${t.Description ? `“${t.Description}”` : t.AccessorID}</h1>
    <${ErrorBox} message=${error} />
    ${state.canWrite
      ? html`<div class="actions">
          <a class="button secondary" href=${`#/tokens/${id}/edit`}>Edit</a>
          <button type="button" class="secondary" onClick=${clone}>Clone</button>
          <button type="button" class="danger" onClick=${remove}>Delete</button></div>`
      : null}
    <dl class="kv">
      <dt>AccessorID</dt><dd>${t.AccessorID}</dd>
      <dt>SecretID</dt><dd><${Secret} value=${t.SecretID} /></dd>
      <dt>Description</dt><dd>${t.Description}</dd>
      <dt>Scope</dt><dd>${t.Local ? 'Local (this datacenter only)' : 'global'}</dd>
      <dt>Namespace</dt><dd>${t.Namespace} / ${t.Partition}</dd>
      ${t.AuthMethod ? html`<dt>Auth method</dt><dd>${t.AuthMethod}</dd>` : null}
      <dt>Expires</dt><dd>${t.ExpirationTime ?? 'never'}</dd>
      <dt>Created</dt><dd>${t.CreateTime}</dd>
      <dt>Policies</dt><dd>${(t.Policies ?? []).map((p) => p.Name).join(', ') || '—'}</dd>
      <dt>Roles</dt><dd>${(t.Roles ?? []).map((r) => r.Name).join(', ') || '—'}</dd>
      <dt>Service identities</dt><dd>${(t.ServiceIdentities ?? []).map((s) => s.ServiceName).join(', ') || '—'}</dd>
      <dt>Node identities</dt><dd>${(t.NodeIdentities ?? []).map((n) => `${n.NodeName} (${n.Datacenter})`).join(', ') || '—'}</dd>
    </dl>
    <h2>Effective policies</h2>
    <div data-testid="effective-policies">${(t.ExpandedPolicies ?? []).map((p) => html`<section><h3>${p.Name}</h3><pre>${p.Rules}</pre></section>`)}</div>
    ${(t.ExpandedRoles ?? []).length > 0 ? html`<h2>Roles</h2><ul>${t.ExpandedRoles.map((r) => html`<li>${r.Name}: ${(r.Policies ?? []).map((p) => p.Name).join(', ')}</li>`)}</ul>` : null}
    ${t.SecretID && t.SecretID !== HIDDEN ? html`<${PermissionTest} secret=${t.SecretID} />` : null}`}<//>`;
}

const RESOURCES = {
  service: ['read', 'write'], key: ['read', 'list', 'write'], node: ['read', 'write'], intention: ['read', 'write'],
  agent: ['read', 'write'], event: ['read', 'write'], query: ['read', 'write'], session: ['read', 'write'],
  acl: ['read', 'write'], operator: ['read', 'write'], keyring: ['read', 'write'], mesh: ['read', 'write'], peering: ['read', 'write'],
};
const UNSEGMENTED = new Set(['acl', 'operator', 'keyring', 'mesh', 'peering']);

/** "Test a permission": may this token do this? Asked with the token's own secret (SPEC §17). */
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
      const [a] = await api('POST', '/v1/internal/acl/authorize', body, { secret });
      setAnswer(a.Allow);
    } catch (err) {
      setError(explain(err));
    }
  };
  const change = (field) => (e) => {
    setAnswer(undefined);
    const next = { ...check, [field]: e.target.value };
    if (field === 'Resource' && !RESOURCES[next.Resource].includes(next.Access)) next.Access = 'read';
    setCheck(next);
  };
  return html`<h2>Test a permission</h2>
    <form class="filters" data-testid="permission-test" onSubmit=${ask}>
      <div><label for="perm-resource">Resource</label>
        <select id="perm-resource" value=${check.Resource} onChange=${change('Resource')}>${Object.keys(RESOURCES).map((r) => html`<option value=${r}>${r}</option>`)}</select></div>
      ${segmented ? html`<div><label for="perm-segment">Name</label><input id="perm-segment" placeholder="web" value=${check.Segment} onInput=${change('Segment')} /></div>` : null}
      <div><label for="perm-access">Access</label>
        <select id="perm-access" value=${check.Access} onChange=${change('Access')}>${RESOURCES[check.Resource].map((a) => html`<option value=${a}>${a}</option>`)}</select></div>
      <div><button type="submit">Check</button></div>
    </form>
    <${ErrorBox} message=${error} />
    ${answer === undefined ? null : html`<p data-testid="permission-answer" class=${answer ? 'allow' : 'deny'}><strong>${answer ? 'allow' : 'deny'}</strong>: this token ${answer ? 'may' : 'may not'} ${check.Access} ${check.Resource}${segmented ? ` “${check.Segment}”` : ''}</p>`}`;
}

export function TokenForm({ id }) {
  const editing = id !== undefined;
  const policies = useLoad(() => api('GET', '/v1/acl/policies'), []);
  const roles = useLoad(() => api('GET', '/v1/acl/roles'), []);
  const [form, setForm] = useState({ Description: '', Policies: [], Roles: [], Services: '', Local: false, TTL: '' });
  const [error, setError] = useState('');
  useEffect(() => {
    if (!editing) return;
    api('GET', `/v1/acl/token/${id}`).then(
      (t) => setForm({ Description: t.Description, Policies: (t.Policies ?? []).map((p) => p.ID), Roles: (t.Roles ?? []).map((r) => r.ID), Services: (t.ServiceIdentities ?? []).map((s) => s.ServiceName).join(', '), Local: t.Local, TTL: '' }),
      (err) => setError(explain(err)),
    );
  }, [id]);
  const save = async (e) => {
    e.preventDefault();
    const body = {
      Description: form.Description,
      Policies: form.Policies.map((ID) => ({ ID })),
      Roles: form.Roles.map((ID) => ({ ID })),
      ServiceIdentities: form.Services.split(',').map((s) => s.trim()).filter(Boolean).map((ServiceName) => ({ ServiceName })),
      Local: form.Local,
      ...(!editing && form.TTL ? { ExpirationTTL: form.TTL } : {}),
    };
    try {
      const t = editing ? await api('PUT', `/v1/acl/token/${id}`, body) : await api('PUT', '/v1/acl/token', body);
      go(`#/tokens/${t.AccessorID}`);
    } catch (err) {
      setError(explain(err));
    }
  };
  return html`<h1>${editing ? 'Edit token' : 'Create token'}</h1>
    <form onSubmit=${save}>
      <div class="field"><label for="t-desc">Description</label><input id="t-desc" value=${form.Description} onInput=${(e) => setForm({ ...form, Description: e.target.value })} /></div>
      <div class="field"><label>Policies</label>${linkChecks(policies.data ?? [], form.Policies, (Policies) => setForm({ ...form, Policies }), 'Policies')}</div>
      <div class="field"><label>Roles</label>${linkChecks(roles.data ?? [], form.Roles, (Roles) => setForm({ ...form, Roles }), 'Roles')}</div>
      <div class="field"><label for="t-services">Service identities (comma-separated)</label><input id="t-services" value=${form.Services} onInput=${(e) => setForm({ ...form, Services: e.target.value })} /></div>
      ${editing ? null : html`<div class="field"><label for="t-ttl">Expires after (e.g. 1h; empty: never)</label><input id="t-ttl" value=${form.TTL} onInput=${(e) => setForm({ ...form, TTL: e.target.value })} /></div>`}
      <div class="field checks"><label><input type="checkbox" id="t-local" checked=${form.Local} disabled=${editing} onChange=${(e) => setForm({ ...form, Local: e.target.checked })} /> Local to this datacenter</label></div>
      <${ErrorBox} message=${error} />
      <div class="actions"><button type="submit">${editing ? 'Save' : 'Create'}</button><a class="button secondary" href=${editing ? `#/tokens/${id}` : '#/tokens'}>Cancel</a></div>
    </form>`;
}

// ---- Policies ----
