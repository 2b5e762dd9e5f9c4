// The watchword web UI: Preact with htm templates, as plain ES modules (no build step).
// The secret lives in this tab's sessionStorage and travels only in the X-Service-Token
// header, never in a URL.
import { html, render, useEffect, useState } from '/ui/vendor/htm/standalone.module.js';

const SECRET_KEY = 'watchword.secret';
const DC_KEY = 'watchword.dc';
const HIDDEN = '<hidden>';

const state = {
  secret: sessionStorage.getItem(SECRET_KEY) ?? '',
  dc: sessionStorage.getItem(DC_KEY) ?? '',
  localDC: '',
  canWrite: false,
  self: undefined,
};

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** An API call with the signed-in secret; `?dc=` when another datacenter is chosen. */
async function api(method, path, body, { dc = state.dc } = {}) {
  const url = new URL(path, location.origin);
  if (dc && dc !== state.localDC) url.searchParams.set('dc', dc);
  const headers = { 'X-Service-Token': state.secret };
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
function explain(err) {
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

const go = (hash) => {
  location.hash = hash;
};

function useRoute() {
  const [hash, setHash] = useState(location.hash || '#/tokens');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/tokens');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash.slice(1).split('?')[0].split('/').filter(Boolean);
}

/** Loads with `load()` whenever `deps` change; shows errors in plain words. */
function useLoad(load, deps) {
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

const ErrorBox = ({ message }) => (message ? html`<div class="error" role="alert">${message}</div>` : null);

function Loading({ result, children }) {
  if (result.error) return html`<${ErrorBox} message=${result.error} />`;
  if (result.loading && result.data === undefined) return html`<p class="muted">Loading…</p>`;
  return children(result.data);
}

/** A secret: `<hidden>` stays hidden; a visible one copies with one click. */
function Secret({ value }) {
  const [copied, setCopied] = useState(false);
  if (!value || value === HIDDEN) return html`<span class="secret muted" data-testid="secret">${HIDDEN}</span>`;
  return html`<span class="secret" data-testid="secret">${value}</span>
    <button type="button" class="secondary" data-testid="copy-secret" onClick=${async () => {
      await navigator.clipboard.writeText(value).catch(() => undefined);
      setCopied(true);
    }}>${copied ? 'Copied' : 'Copy'}</button>`;
}

function confirmThen(message, action) {
  if (window.confirm(message)) action();
}

// ---- Sign in ----

function SignIn({ onSignedIn }) {
  const [secret, setSecret] = useState('');
  const [error, setError] = useState('');
  const submit = async (e) => {
    e.preventDefault();
    state.secret = secret.trim();
    try {
      await signIn();
      onSignedIn();
    } catch (err) {
      state.secret = '';
      setError(err instanceof ApiError && err.status === 403 ? 'That secret is not a valid token here.' : explain(err));
    }
  };
  return html`<form class="signin" onSubmit=${submit}>
    <h1>Sign in to watchword</h1>
    <p class="muted">Paste the SecretID of an ACL token. It is kept in this browser tab only.</p>
    <div class="field"><label for="secret">Token secret</label><input id="secret" type="password" autocomplete="off" value=${secret} onInput=${(e) => setSecret(e.target.value)} /></div>
    <${ErrorBox} message=${error} />
    <button type="submit">Sign in</button>
  </form>`;
}

/** Checks the secret, learns this datacenter and whether the token may write ACLs. */
async function signIn() {
  const self = await api('GET', '/v1/acl/token/self', undefined, { dc: '' });
  const agent = await api('GET', '/v1/agent/self', undefined, { dc: '' });
  state.self = self;
  state.localDC = agent.Config.Datacenter;
  // A token sees secrets (its own included) only with acl:write.
  try {
    const read = await api('GET', `/v1/acl/token/${self.AccessorID}`, undefined, { dc: '' });
    state.canWrite = read.SecretID !== HIDDEN;
  } catch {
    state.canWrite = false;
  }
  sessionStorage.setItem(SECRET_KEY, state.secret);
  if (!state.dc) state.dc = state.localDC;
}

// ---- Tokens ----

function TokenList() {
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

function TokenDetail({ id }) {
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
    ${(t.ExpandedRoles ?? []).length > 0 ? html`<h2>Roles</h2><ul>${t.ExpandedRoles.map((r) => html`<li>${r.Name}: ${(r.Policies ?? []).map((p) => p.Name).join(', ')}</li>`)}</ul>` : null}`}<//>`;
}

function linkChecks(all, chosen, setChosen, name) {
  return html`<div class="checks" role="group" aria-label=${name}>${all.map((o) => html`<label><input type="checkbox" checked=${chosen.includes(o.ID)} onChange=${(e) =>
    setChosen(e.target.checked ? [...chosen, o.ID] : chosen.filter((x) => x !== o.ID))} /> ${o.Name}</label>`)}</div>`;
}

function TokenForm({ id }) {
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

function PolicyList() {
  const list = useLoad(() => api('GET', '/v1/acl/policies'), []);
  return html`<h1>Policies</h1>
    ${state.canWrite ? html`<div class="actions"><a class="button" href="#/policies/new">Create policy</a></div>` : null}
    <${Loading} result=${list}>${(ps) => html`<div class="table-wrap"><table><thead><tr><th>Name</th><th>Description</th><th>Datacenters</th></tr></thead>
      <tbody>${ps.map((p) => html`<tr><td><a href=${`#/policies/${p.ID}`}>${p.Name}</a></td><td>${p.Description}</td><td>${(p.Datacenters ?? []).join(', ') || 'all'}</td></tr>`)}</tbody></table></div>`}<//>`;
}

/** The line and column of a rules parse error (`At 2:5: …`), shown under the editor. */
function ParseError({ message, rules }) {
  const m = /At (\d+):(\d+)/.exec(message ?? '');
  if (!message) return null;
  if (!m) return html`<${ErrorBox} message=${message} />`;
  const line = Number(m[1]);
  const col = Number(m[2]);
  const text = rules.split('\n')[line - 1] ?? '';
  return html`<div class="error" role="alert" data-testid="policy-error">${message}
    <div>Line ${line}, column ${col}:</div><div class="where"><div>${text || ' '}</div><div>${' '.repeat(Math.max(0, col - 1))}^</div></div></div>`;
}

function PolicyEditor({ id }) {
  const creating = id === 'new';
  const [form, setForm] = useState({ Name: '', Description: '', Rules: '' });
  const [error, setError] = useState('');
  const [saved, setSaved] = useState('');
  const [builtin, setBuiltin] = useState(false);
  useEffect(() => {
    if (creating) return;
    api('GET', `/v1/acl/policy/${id}`).then(
      (p) => {
        setForm({ Name: p.Name, Description: p.Description, Rules: p.Rules ?? '' });
        setBuiltin(p.ID.startsWith('00000000-0000-0000-0000-'));
      },
      (err) => setError(explain(err)),
    );
  }, [id]);
  const readOnly = !state.canWrite || builtin;
  const save = async (e) => {
    e.preventDefault();
    setSaved('');
    try {
      const p = creating ? await api('PUT', '/v1/acl/policy', form) : await api('PUT', `/v1/acl/policy/${id}`, form);
      setError('');
      setSaved(`Saved policy “${p.Name}”.`);
      if (creating) go(`#/policies/${p.ID}`);
    } catch (err) {
      setError(err instanceof ApiError && err.status === 400 ? err.message : explain(err));
    }
  };
  const remove = () =>
    confirmThen(`Delete policy ${form.Name}?`, async () => {
      try {
        await api('DELETE', `/v1/acl/policy/${id}`);
        go('#/policies');
      } catch (err) {
        setError(explain(err));
      }
    });
  return html`<h1>${creating ? 'Create policy' : `Policy “${form.Name}”`}</h1>
    <form onSubmit=${save}>
      <div class="field"><label for="p-name">Name</label><input id="p-name" value=${form.Name} readOnly=${readOnly} onInput=${(e) => setForm({ ...form, Name: e.target.value })} /></div>
      <div class="field"><label for="p-desc">Description</label><input id="p-desc" value=${form.Description} readOnly=${readOnly} onInput=${(e) => setForm({ ...form, Description: e.target.value })} /></div>
      <div class="field"><label for="p-rules">Rules (HCL or JSON)</label><textarea id="p-rules" spellcheck="false" readOnly=${readOnly} value=${form.Rules} onInput=${(e) => setForm({ ...form, Rules: e.target.value })}></textarea></div>
      <${ParseError} message=${error} rules=${form.Rules} />
      ${saved ? html`<div class="notice" role="status">${saved}</div>` : null}
      ${readOnly ? null : html`<div class="actions"><button type="submit">${creating ? 'Create' : 'Save'}</button>${creating ? null : html`<button type="button" class="danger" onClick=${remove}>Delete</button>`}</div>`}
    </form>`;
}

// ---- Roles ----

function RoleList() {
  const list = useLoad(() => api('GET', '/v1/acl/roles'), []);
  return html`<h1>Roles</h1>
    ${state.canWrite ? html`<div class="actions"><a class="button" href="#/roles/new">Create role</a></div>` : null}
    <${Loading} result=${list}>${(rs) => html`<div class="table-wrap"><table><thead><tr><th>Name</th><th>Description</th><th>Policies</th></tr></thead>
      <tbody>${rs.map((r) => html`<tr><td><a href=${`#/roles/${r.ID}`}>${r.Name}</a></td><td>${r.Description}</td><td>${(r.Policies ?? []).map((p) => p.Name).join(', ')}</td></tr>`)}</tbody></table></div>`}<//>`;
}

function RoleEditor({ id }) {
  const creating = id === 'new';
  const policies = useLoad(() => api('GET', '/v1/acl/policies'), []);
  const [form, setForm] = useState({ Name: '', Description: '', Policies: [], Services: '' });
  const [error, setError] = useState('');
  useEffect(() => {
    if (creating) return;
    api('GET', `/v1/acl/role/${id}`).then(
      (r) => setForm({ Name: r.Name, Description: r.Description, Policies: (r.Policies ?? []).map((p) => p.ID), Services: (r.ServiceIdentities ?? []).map((s) => s.ServiceName).join(', ') }),
      (err) => setError(explain(err)),
    );
  }, [id]);
  const save = async (e) => {
    e.preventDefault();
    const body = { Name: form.Name, Description: form.Description, Policies: form.Policies.map((ID) => ({ ID })), ServiceIdentities: form.Services.split(',').map((s) => s.trim()).filter(Boolean).map((ServiceName) => ({ ServiceName })) };
    try {
      await (creating ? api('PUT', '/v1/acl/role', body) : api('PUT', `/v1/acl/role/${id}`, body));
      go('#/roles');
    } catch (err) {
      setError(explain(err));
    }
  };
  const remove = () => confirmThen(`Delete role ${form.Name}?`, () => api('DELETE', `/v1/acl/role/${id}`).then(() => go('#/roles'), (err) => setError(explain(err))));
  const ro = !state.canWrite;
  return html`<h1>${creating ? 'Create role' : `Role “${form.Name}”`}</h1>
    <form onSubmit=${save}>
      <div class="field"><label for="r-name">Name</label><input id="r-name" readOnly=${ro} value=${form.Name} onInput=${(e) => setForm({ ...form, Name: e.target.value })} /></div>
      <div class="field"><label for="r-desc">Description</label><input id="r-desc" readOnly=${ro} value=${form.Description} onInput=${(e) => setForm({ ...form, Description: e.target.value })} /></div>
      <div class="field"><label>Policies</label>${linkChecks(policies.data ?? [], form.Policies, (Policies) => setForm({ ...form, Policies }), 'Policies')}</div>
      <div class="field"><label for="r-services">Service identities (comma-separated)</label><input id="r-services" readOnly=${ro} value=${form.Services} onInput=${(e) => setForm({ ...form, Services: e.target.value })} /></div>
      <${ErrorBox} message=${error} />
      ${ro ? null : html`<div class="actions"><button type="submit">${creating ? 'Create' : 'Save'}</button>${creating ? null : html`<button type="button" class="danger" onClick=${remove}>Delete</button>`}</div>`}
    </form>`;
}

// ---- Templated policies ----

function TemplatedPolicies() {
  const list = useLoad(() => api('GET', '/v1/acl/templated-policies'), []);
  const [chosen, setChosen] = useState('builtin/service');
  const [name, setName] = useState('web');
  const [preview, setPreview] = useState({});
  const show = async (e) => {
    e.preventDefault();
    try {
      setPreview({ policy: await api('POST', `/v1/acl/templated-policy/preview/${chosen}`, { Name: name }) });
    } catch (err) {
      setPreview({ error: explain(err) });
    }
  };
  return html`<h1>Templated policies</h1>
    <${Loading} result=${list}>${(all) => html`
      <form class="filters" onSubmit=${show}>
        <div><label for="tp-name">Template</label><select id="tp-name" value=${chosen} onChange=${(e) => setChosen(e.target.value)}>${Object.keys(all).map((n) => html`<option value=${n}>${n}</option>`)}</select></div>
        <div><label for="tp-var">Name variable</label><input id="tp-var" value=${name} onInput=${(e) => setName(e.target.value)} /></div>
        <div><button type="submit">Preview</button></div>
      </form>
      <p class="muted">${all[chosen]?.Description}</p>
      <${ErrorBox} message=${preview.error} />
      ${preview.policy ? html`<h2>${preview.policy.Name}</h2><pre data-testid="preview">${preview.policy.Rules}</pre>` : null}`}<//>`;
}

// ---- Auth methods and binding rules ----

function AuthMethods() {
  const list = useLoad(() => api('GET', '/v1/acl/auth-methods'), []);
  const [form, setForm] = useState({ Name: '', Type: 'jwt', MaxTokenTTL: '', TokenLocality: 'local', Config: '{\n  "JWKSURL": "https://issuer.example/keys"\n}' });
  const [error, setError] = useState('');
  const create = async (e) => {
    e.preventDefault();
    let config;
    try {
      config = JSON.parse(form.Config);
    } catch (err) {
      return setError(`The Config is not valid JSON: ${err.message}`);
    }
    try {
      await api('PUT', '/v1/acl/auth-method', { ...form, Config: config, ...(form.MaxTokenTTL ? {} : { MaxTokenTTL: undefined }) });
      setError('');
      list.reload();
    } catch (err) {
      setError(explain(err));
    }
  };
  const remove = (name) => confirmThen(`Delete auth method ${name}, its binding rules and every token it issued?`, () => api('DELETE', `/v1/acl/auth-method/${name}`).then(list.reload, (err) => setError(explain(err))));
  return html`<h1>Auth methods</h1>
    <${Loading} result=${list}>${(ms) => html`<div class="table-wrap"><table><thead><tr><th>Name</th><th>Type</th><th>Token locality</th><th>Max token TTL</th><th></th></tr></thead>
      <tbody>${ms.map((m) => html`<tr><td><a href=${`#/binding-rules?method=${m.Name}`} onClick=${() => sessionStorage.setItem('watchword.method', m.Name)}>${m.Name}</a></td><td>${m.Type}</td><td>${m.TokenLocality ?? 'local'}</td><td>${m.MaxTokenTTL ?? 'none'}</td>
        <td>${state.canWrite ? html`<button type="button" class="danger" onClick=${() => remove(m.Name)}>Delete</button>` : null}</td></tr>`)}</tbody></table></div>`}<//>
    <${ErrorBox} message=${error} />
    ${state.canWrite
      ? html`<h2>New auth method</h2><form onSubmit=${create}>
          <div class="field"><label for="am-name">Name</label><input id="am-name" value=${form.Name} onInput=${(e) => setForm({ ...form, Name: e.target.value })} /></div>
          <div class="field"><label for="am-type">Type</label><select id="am-type" value=${form.Type} onChange=${(e) => setForm({ ...form, Type: e.target.value })}><option>jwt</option><option>kubernetes</option></select></div>
          <div class="field"><label for="am-ttl">Max token TTL (e.g. 1h)</label><input id="am-ttl" value=${form.MaxTokenTTL} onInput=${(e) => setForm({ ...form, MaxTokenTTL: e.target.value })} /></div>
          <div class="field"><label for="am-loc">Token locality</label><select id="am-loc" value=${form.TokenLocality} onChange=${(e) => setForm({ ...form, TokenLocality: e.target.value })}><option>local</option><option>global</option></select></div>
          <div class="field"><label for="am-config">Config (JSON)</label><textarea id="am-config" value=${form.Config} onInput=${(e) => setForm({ ...form, Config: e.target.value })}></textarea></div>
          <button type="submit">Create auth method</button></form>`
      : null}`;
}

function BindingRules() {
  const [method, setMethod] = useState(sessionStorage.getItem('watchword.method') ?? '');
  const methods = useLoad(() => api('GET', '/v1/acl/auth-methods'), []);
  const rules = useLoad(() => api('GET', `/v1/acl/binding-rules${method ? `?authmethod=${encodeURIComponent(method)}` : ''}`), [method]);
  const [form, setForm] = useState({ BindType: 'service', BindName: '', Selector: '' });
  const [error, setError] = useState('');
  const create = async (e) => {
    e.preventDefault();
    try {
      await api('PUT', '/v1/acl/binding-rule', { ...form, AuthMethod: method });
      setError('');
      rules.reload();
    } catch (err) {
      setError(explain(err));
    }
  };
  const remove = (id) => confirmThen('Delete this binding rule?', () => api('DELETE', `/v1/acl/binding-rule/${id}`).then(rules.reload, (err) => setError(explain(err))));
  return html`<h1>Binding rules</h1>
    <div class="filters"><div><label for="br-method">Auth method</label><select id="br-method" value=${method} onChange=${(e) => {
      setMethod(e.target.value);
      sessionStorage.setItem('watchword.method', e.target.value);
    }}><option value="">(all)</option>${(methods.data ?? []).map((m) => html`<option value=${m.Name}>${m.Name}</option>`)}</select></div></div>
    <${Loading} result=${rules}>${(rs) => html`<div class="table-wrap"><table><thead><tr><th>Auth method</th><th>Bind</th><th>Selector</th><th>Description</th><th></th></tr></thead>
      <tbody>${rs.map((r) => html`<tr><td>${r.AuthMethod}</td><td>${r.BindType}: ${r.BindName}</td><td><code>${r.Selector}</code></td><td>${r.Description}</td>
        <td>${state.canWrite ? html`<button type="button" class="danger" onClick=${() => remove(r.ID)}>Delete</button>` : null}</td></tr>`)}</tbody></table></div>`}<//>
    <${ErrorBox} message=${error} />
    ${state.canWrite && method
      ? html`<h2>New rule for ${method}</h2><form onSubmit=${create}>
          <div class="field"><label for="br-type">Bind type</label><select id="br-type" value=${form.BindType} onChange=${(e) => setForm({ ...form, BindType: e.target.value })}>${['service', 'node', 'role', 'policy', 'templated-policy'].map((t) => html`<option>${t}</option>`)}</select></div>
          <div class="field"><label for="br-name">Bind name</label><input id="br-name" value=${form.BindName} onInput=${(e) => setForm({ ...form, BindName: e.target.value })} /></div>
          <div class="field"><label for="br-sel">Selector</label><input id="br-sel" value=${form.Selector} onInput=${(e) => setForm({ ...form, Selector: e.target.value })} /></div>
          <button type="submit">Create rule</button></form>`
      : null}`;
}

// ---- Datacenters ----

function Datacenters() {
  const dcs = useLoad(async () => {
    const names = await api('GET', '/v1/catalog/datacenters', undefined, { dc: '' });
    return Promise.all(
      names.map(async (name) => {
        try {
          return { name, status: await api('GET', '/v1/acl/replication', undefined, { dc: name }) };
        } catch (err) {
          return { name, error: explain(err) };
        }
      }),
    );
  }, []);
  return html`<h1>Datacenters</h1>
    <${Loading} result=${dcs}>${(list) => html`<div class="table-wrap"><table data-testid="datacenters">
      <thead><tr><th>Datacenter</th><th>Role</th><th>Replication</th><th>Replicated index</th><th>Lag (entries)</th><th>Last contact</th></tr></thead>
      <tbody>${list.map(({ name, status, error }) => {
        if (error) return html`<tr><td>${name}</td><td colspan="5"><span class="badge bad">Unreachable</span> ${error}</td></tr>`;
        const primary = !status.Enabled;
        return html`<tr data-dc=${name}>
          <td>${name}${name === state.localDC ? html` <span class="badge">this one</span>` : null}</td>
          <td>${primary ? 'primary' : 'secondary'}</td>
          <td>${primary ? html`<span class="badge ok">Primary</span>` : status.Connected ? html`<span class="badge ok">Connected</span>` : html`<span class="badge bad">Not connected</span>`}</td>
          <td>${status.ReplicatedIndex}</td>
          <td data-testid="lag">${primary ? '—' : status.LagEntries}</td>
          <td>${primary ? '—' : `${status.LastContactMs} ms ago`}</td></tr>`;
      })}</tbody></table></div>`}<//>`;
}

// ---- Frame ----

const PAGES = [
  ['tokens', 'Tokens'],
  ['policies', 'Policies'],
  ['roles', 'Roles'],
  ['templated-policies', 'Templated policies'],
  ['auth-methods', 'Auth methods'],
  ['binding-rules', 'Binding rules'],
  ['datacenters', 'Datacenters'],
];

function DatacenterSwitch({ onChange }) {
  const dcs = useLoad(() => api('GET', '/v1/catalog/datacenters', undefined, { dc: '' }), []);
  return html`<label for="dc-switch" class="muted" style="font-weight:400">Datacenter</label>
    <select id="dc-switch" value=${state.dc} onChange=${(e) => {
      state.dc = e.target.value;
      sessionStorage.setItem(DC_KEY, state.dc);
      onChange();
    }}>${(dcs.data ?? [state.dc]).map((d) => html`<option value=${d}>${d}</option>`)}</select>`;
}

function Page({ route }) {
  const [page, id, sub] = route;
  if (page === 'tokens' && id === 'new') return html`<${TokenForm} />`;
  if (page === 'tokens' && id && sub === 'edit') return html`<${TokenForm} id=${id} />`;
  if (page === 'tokens' && id) return html`<${TokenDetail} id=${id} />`;
  if (page === 'policies' && id) return html`<${PolicyEditor} id=${id} />`;
  if (page === 'policies') return html`<${PolicyList} />`;
  if (page === 'roles' && id) return html`<${RoleEditor} id=${id} />`;
  if (page === 'roles') return html`<${RoleList} />`;
  if (page === 'templated-policies') return html`<${TemplatedPolicies} />`;
  if (page === 'auth-methods') return html`<${AuthMethods} />`;
  if (page === 'binding-rules') return html`<${BindingRules} />`;
  if (page === 'datacenters') return html`<${Datacenters} />`;
  return html`<${TokenList} />`;
}

function App() {
  const route = useRoute();
  const [signedIn, setSignedIn] = useState(false);
  const [checking, setChecking] = useState(state.secret !== '');
  const [, redraw] = useState(0);
  useEffect(() => {
    if (!state.secret) return;
    signIn().then(
      () => {
        setSignedIn(true);
        setChecking(false);
      },
      () => {
        sessionStorage.removeItem(SECRET_KEY);
        state.secret = '';
        setChecking(false);
      },
    );
  }, []);
  if (checking) return html`<p class="loading">Loading…</p>`;
  if (!signedIn) return html`<${SignIn} onSignedIn=${() => setSignedIn(true)} />`;
  const signOut = () => {
    sessionStorage.removeItem(SECRET_KEY);
    sessionStorage.removeItem(DC_KEY);
    state.secret = '';
    state.dc = '';
    setSignedIn(false);
  };
  return html`<header class="bar">
      <span class="brand">watchword</span>
      <nav aria-label="Main">${PAGES.map(([p, label]) => html`<a href=${`#/${p}`} class=${route[0] === p || (!route[0] && p === 'tokens') ? 'active' : ''}>${label}</a>`)}<a href="/ui/api/">API</a></nav>
      <div class="right">
        <${DatacenterSwitch} onChange=${() => redraw((n) => n + 1)} />
        <span class="muted" data-testid="whoami">${state.self?.Description || state.self?.AccessorID}${state.canWrite ? '' : ' (read-only)'}</span>
        <button type="button" class="secondary" onClick=${signOut}>Sign out</button>
      </div>
    </header>
    <main><${Page} route=${route} key=${`${route.join('/')}@${state.dc}`} /></main>`;
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
