// Auth methods and binding rules.
import { html, useState } from '/ui/vendor/htm/standalone.module.js';
import { ErrorBox, Loading, api, confirmThen, explain, state, useLoad } from './lib.js';

export function AuthMethods() {
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

export function BindingRules() {
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
