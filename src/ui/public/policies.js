// Policies (an editor that points at a parse error), roles, and templated policies with their preview.
import { html, useEffect, useState } from '/ui/vendor/htm/standalone.module.js';
import { ApiError, ErrorBox, Loading, api, confirmThen, explain, go, linkChecks, state, useLoad } from './lib.js';

export function PolicyList() {
  const list = useLoad(() => api('GET', '/v1/acl/policies'), []);
  return html`<h1>Policies</h1>
    ${state.canWrite ? html`<div class="actions"><a class="button" href="#/policies/new">Create policy</a></div>` : null}
    <${Loading} result=${list}>${(ps) => html`<div class="table-wrap"><table><thead><tr><th>Name</th><th>Description</th><th>Datacenters</th></tr></thead>
      <tbody>${ps.map((p) => html`<tr><td><a href=${`#/policies/${p.ID}`}>${p.Name}</a></td><td>${p.Description}</td><td>${(p.Datacenters ?? []).join(', ') || 'all'}</td></tr>`)}</tbody></table></div>`}<//>`;
}

/** The line and column of a rules parse error (`At 2:5: …`), shown under the editor. */
export function ParseError({ message, rules }) {
  const m = /At (\d+):(\d+)/.exec(message ?? '');
  if (!message) return null;
  if (!m) return html`<${ErrorBox} message=${message} />`;
  const line = Number(m[1]);
  const col = Number(m[2]);
  const text = rules.split('\n')[line - 1] ?? '';
  return html`<div class="error" role="alert" data-testid="policy-error">${message}
    <div>Line ${line}, column ${col}:</div><div class="where"><div>${text || ' '}</div><div>${' '.repeat(Math.max(0, col - 1))}^</div></div></div>`;
}

export function PolicyEditor({ id }) {
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

export function RoleList() {
  const list = useLoad(() => api('GET', '/v1/acl/roles'), []);
  return html`<h1>Roles</h1>
    ${state.canWrite ? html`<div class="actions"><a class="button" href="#/roles/new">Create role</a></div>` : null}
    <${Loading} result=${list}>${(rs) => html`<div class="table-wrap"><table><thead><tr><th>Name</th><th>Description</th><th>Policies</th></tr></thead>
      <tbody>${rs.map((r) => html`<tr><td><a href=${`#/roles/${r.ID}`}>${r.Name}</a></td><td>${r.Description}</td><td>${(r.Policies ?? []).map((p) => p.Name).join(', ')}</td></tr>`)}</tbody></table></div>`}<//>`;
}

export function RoleEditor({ id }) {
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

export function TemplatedPolicies() {
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
