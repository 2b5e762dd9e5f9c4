// Auth methods and binding rules: lists, and forms for create and edit that keep every field.
import { useEffect, useState } from 'preact/hooks';
import { Loading, api, apiPath, confirmThen, explain, go, html, state, useLoad, useSearch } from './lib.js';
import { ListField, MODELS, MapField, Messages, PemListField, SaveBar, SelectField, TextArea, TextField, useRecordForm } from './forms.js';

export function AuthMethods() {
  const list = useLoad(() => api('GET', '/v1/acl/auth-methods'), []);
  const [error, setError] = useState('');
  const remove = (name) =>
    confirmThen(`Delete auth method ${name}, its binding rules and every token it issued?`, () =>
      api('DELETE', apiPath`/v1/acl/auth-method/${name}`).then(list.reload, (err) => setError(explain(err))),
    );
  return html`<h1>Auth methods</h1>
    ${state.canWrite ? html`<div class="actions"><a class="button" href="#/auth-methods/new">Create auth method</a></div>` : null}
    ${error ? html`<div class="error" role="alert">${error}</div>` : null}
    <${Loading} result=${list}>${(
      ms,
    ) => html`<div class="table-wrap"><table data-testid="auth-method-table"><thead><tr><th>Name</th><th>Type</th><th>Display name</th><th>Token locality</th><th>Max token TTL</th><th></th></tr></thead>
      <tbody>${ms.map(
        (
          m,
        ) => html`<tr><td><a href=${`#/auth-methods/${encodeURIComponent(m.Name)}`}>${m.Name}</a></td><td>${m.Type}</td><td>${m.DisplayName ?? ''}</td><td>${m.TokenLocality || 'local'}</td><td>${m.MaxTokenTTL ?? 'none'}</td>
        <td><a href=${`#/binding-rules?method=${encodeURIComponent(m.Name)}`}>binding rules</a>${state.canWrite ? html` <button type="button" class="danger small" onClick=${() => remove(m.Name)}>Delete</button>` : null}</td></tr>`,
      )}</tbody></table></div>`}<//>`;
}

/** The typed fields of each method type's Config; anything else stays in the JSON. */
const CONFIG_FIELDS = {
  jwt: [
    ['JWKSURL', 'text', 'JWKS URL'],
    ['JWKSCACert', 'textarea', 'JWKS CA certificate (PEM)'],
    ['OIDCDiscoveryURL', 'text', 'OIDC discovery URL'],
    ['OIDCDiscoveryCACert', 'textarea', 'OIDC discovery CA certificate (PEM)'],
    ['JWTValidationPubKeys', 'pem-list', 'Validation public keys (PEM)'],
    ['BoundIssuer', 'text', 'Bound issuer'],
    ['BoundAudiences', 'list', 'Bound audiences'],
    ['ClaimMappings', 'map', 'Claim mappings (claim=field, one a line)'],
    ['ListClaimMappings', 'map', 'List claim mappings (claim=field, one a line)'],
    ['JWTSupportedAlgs', 'list', 'Supported algorithms'],
    ['ExpirationLeeway', 'text', 'Expiration leeway'],
    ['NotBeforeLeeway', 'text', 'Not-before leeway'],
    ['ClockSkewLeeway', 'text', 'Clock skew leeway'],
  ],
  kubernetes: [
    ['Host', 'text', 'Kubernetes API host (https://host:port)'],
    ['CACert', 'textarea', 'CA certificate (PEM)'],
    ['ServiceAccountJWT', 'password', 'Service account JWT (for TokenReview)'],
  ],
};

/** A Config key set, or removed when emptied (an absent key stays absent). */
const setKey = (config, key, value) => {
  const next = { ...config };
  if (value === undefined || value === '') delete next[key];
  else next[key] = value;
  return next;
};

/** Config as typed fields per method type, with the whole object as JSON beside them. */
function ConfigEditor({ type, value, onValue }) {
  const config = value ?? {};
  const [json, setJson] = useState(JSON.stringify(config, null, 2));
  const [jsonError, setJsonError] = useState('');
  useEffect(() => {
    let same = false;
    try {
      same = JSON.stringify(JSON.parse(json)) === JSON.stringify(config);
    } catch {
      same = false;
    }
    if (!same && !jsonError) setJson(JSON.stringify(config, null, 2));
  }, [JSON.stringify(config)]);
  const field = ([key, kind, label]) => {
    const id = `am-config-${key}`;
    const set = (v) => onValue(setKey(config, key, v));
    const v = config[key];
    if (kind === 'textarea') return html`<${TextArea} id=${id} label=${label} rows="3" value=${v} onValue=${set} />`;
    if (kind === 'list') return html`<${ListField} id=${id} label=${label} value=${v} onValue=${set} />`;
    if (kind === 'map') return html`<${MapField} id=${id} label=${label} value=${v} onValue=${set} />`;
    if (kind === 'pem-list') return html`<${PemListField} id=${id} label=${label} value=${v} onValue=${set} />`;
    return html`<${TextField} id=${id} label=${label} type=${kind === 'password' ? 'password' : 'text'} value=${v === undefined ? '' : String(v)} onValue=${set} />`;
  };
  return html`<fieldset class="field"><legend>Config</legend>
    ${(CONFIG_FIELDS[type] ?? []).map(field)}
    <details><summary>All of Config as JSON</summary>
      <${TextArea} id="am-config" label="Config (JSON)" rows="8" value=${json} onValue=${(text) => {
        setJson(text);
        try {
          const parsed = JSON.parse(text);
          if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('Config must be a JSON object');
          setJsonError('');
          onValue(parsed);
        } catch (err) {
          setJsonError(`Not valid JSON yet: ${err.message}`);
        }
      }} />
      ${jsonError ? html`<div class="hint error-text" data-testid="config-json-error">${jsonError}</div>` : null}
    </details></fieldset>`;
}

const NEW_METHOD = { Name: '', Type: 'jwt', DisplayName: '', Description: '', TokenLocality: 'local', Config: {} };

export function AuthMethodForm({ name }) {
  const creating = name === 'new';
  const form = useRecordForm(MODELS.authMethod, creating ? undefined : () => api('GET', apiPath`/v1/acl/auth-method/${name}`), NEW_METHOD, [
    name,
  ]);
  const { draft, set, editing } = form;
  const ro = !state.canWrite;
  const submit = async (e) => {
    e.preventDefault();
    const m = await form.save((body) =>
      editing ? api('PUT', apiPath`/v1/acl/auth-method/${name}`, body) : api('PUT', '/v1/acl/auth-method', body),
    );
    if (m) {
      form.setNotice(`Saved auth method “${m.Name}”.`);
      if (creating) go(`#/auth-methods/${encodeURIComponent(m.Name)}`);
    }
  };
  if (draft === undefined)
    return html`<h1>Auth method</h1><${Messages} form=${form} />${form.error ? null : html`<p class="muted">Loading…</p>`}`;
  return html`<h1>${creating ? 'Create auth method' : `Auth method “${name}”`}</h1>
    <form onSubmit=${submit} data-testid="auth-method-form">
      <${TextField} id="am-name" label="Name" value=${draft.Name} readOnly=${editing || ro} onValue=${(v) => set('Name', v)} />
      <${SelectField} id="am-type" label="Type" value=${draft.Type} options=${MODELS.authMethod.fields.Type.options} disabled=${editing || ro} onValue=${(v) => set('Type', v)} />
      <${TextField} id="am-display" label="Display name" value=${draft.DisplayName} readOnly=${ro} onValue=${(v) => set('DisplayName', v)} />
      <${TextField} id="am-desc" label="Description" value=${draft.Description} readOnly=${ro} onValue=${(v) => set('Description', v)} />
      <${TextField} id="am-ttl" label="Max token TTL" placeholder="e.g. 1h" value=${draft.MaxTokenTTL} readOnly=${ro} onValue=${(v) => set('MaxTokenTTL', v === '' ? undefined : v)} />
      <${TextField} id="am-idle-ttl" label="Token idle TTL (revoke login tokens unused this long; 0s never; empty: the agent's default)" placeholder="e.g. 72h" value=${draft.TokenIdleTTL} readOnly=${ro} onValue=${(v) => set('TokenIdleTTL', v === '' ? undefined : v)} />
      <${SelectField} id="am-locality" label="Token locality" value=${draft.TokenLocality || 'local'} options=${[{ value: 'local', label: 'local (tokens stay in the datacenter of the login)' }, { value: 'global', label: 'global (tokens replicate everywhere)' }]}
        disabled=${ro} onValue=${(v) => set('TokenLocality', v)} />
      <${ConfigEditor} type=${draft.Type} value=${draft.Config} onValue=${(v) => set('Config', v)} />
      <${Messages} form=${form} />
      ${ro ? null : html`<${SaveBar} form=${form} cancel="#/auth-methods" />`}
    </form>
    ${creating ? null : html`<p><a href=${`#/binding-rules?method=${encodeURIComponent(name)}`}>Binding rules of ${name}</a></p>`}`;
}

export function BindingRules({ method: initial }) {
  const [method, setMethod] = useState(initial ?? '');
  const methods = useLoad(() => api('GET', '/v1/acl/auth-methods'), []);
  const rules = useLoad(() => api('GET', `/v1/acl/binding-rules${method ? `?authmethod=${encodeURIComponent(method)}` : ''}`), [method]);
  const [error, setError] = useState('');
  const remove = (id) =>
    confirmThen('Delete this binding rule?', () =>
      api('DELETE', apiPath`/v1/acl/binding-rule/${id}`).then(rules.reload, (err) => setError(explain(err))),
    );
  return html`<h1>Binding rules</h1>
    <div class="filters"><div><label for="br-method">Auth method</label><select id="br-method" value=${method} onChange=${(e) => setMethod(e.target.value)}>
      <option value="">(all)</option>${(methods.data ?? []).map((m) => html`<option value=${m.Name}>${m.Name}</option>`)}</select></div></div>
    ${state.canWrite ? html`<div class="actions"><a class="button" href=${`#/binding-rules/new${method ? `?method=${encodeURIComponent(method)}` : ''}`}>Create binding rule</a></div>` : null}
    ${error ? html`<div class="error" role="alert">${error}</div>` : null}
    <${Loading} result=${rules}>${(rs) => html`<${RuleTable} rules=${rs} onRemove=${remove} />`}<//>`;
}

function RuleTable({ rules, onRemove }) {
  const [shown, box] = useSearch(rules, (r) => `${r.Description} ${r.BindName} ${r.Selector}`);
  return html`<div class="filters">${box}</div><div class="table-wrap"><table data-testid="binding-rule-table"><thead><tr><th>Auth method</th><th>Bind</th><th>Selector</th><th>Description</th><th></th></tr></thead>
      <tbody>${shown.map(
        (
          r,
        ) => html`<tr><td>${r.AuthMethod}</td><td><a href=${`#/binding-rules/${r.ID}`}>${r.BindType}: ${r.BindName}</a></td><td><code>${r.Selector}</code></td><td>${r.Description}</td>
        <td>${state.canWrite ? html`<button type="button" class="danger small" onClick=${() => onRemove(r.ID)}>Delete</button>` : null}</td></tr>`,
      )}</tbody></table></div>`;
}

export function BindingRuleForm({ id, method }) {
  const creating = id === 'new';
  const methods = useLoad(() => api('GET', '/v1/acl/auth-methods'), []);
  const form = useRecordForm(
    MODELS.bindingRule,
    creating ? undefined : () => api('GET', apiPath`/v1/acl/binding-rule/${id}`),
    { Description: '', AuthMethod: method ?? '', Selector: '', BindType: 'service', BindName: '' },
    [id],
  );
  const { draft, set, editing } = form;
  const ro = !state.canWrite;
  const names = (methods.data ?? []).map((m) => m.Name);
  useEffect(() => {
    if (!editing && draft && !draft.AuthMethod && names.length > 0) set('AuthMethod', names[0]);
  }, [names.join(',')]);
  const submit = async (e) => {
    e.preventDefault();
    const r = await form.save((body) =>
      editing ? api('PUT', apiPath`/v1/acl/binding-rule/${id}`, body) : api('PUT', '/v1/acl/binding-rule', body),
    );
    if (r) {
      form.setNotice('Saved the binding rule.');
      if (creating) go(`#/binding-rules/${r.ID}`);
    }
  };
  if (draft === undefined)
    return html`<h1>Binding rule</h1><${Messages} form=${form} />${form.error ? null : html`<p class="muted">Loading…</p>`}`;
  const templated = draft.BindType === 'templated-policy';
  return html`<h1>${creating ? 'Create binding rule' : `Binding rule of ${draft.AuthMethod}`}</h1>
    <form onSubmit=${submit} data-testid="binding-rule-form">
      <${SelectField} id="br-authmethod" label="Auth method" value=${draft.AuthMethod} disabled=${editing || ro}
        options=${names.includes(draft.AuthMethod) || !draft.AuthMethod ? names : [draft.AuthMethod, ...names]} onValue=${(v) => set('AuthMethod', v)} />
      <${TextField} id="br-desc" label="Description" value=${draft.Description} readOnly=${ro} onValue=${(v) => set('Description', v)} />
      <${TextField} id="br-selector" label=${'Selector (e.g. value.service == "web")'} value=${draft.Selector} readOnly=${ro} onValue=${(v) => set('Selector', v)} />
      <${SelectField} id="br-type" label="Bind type" value=${draft.BindType} options=${MODELS.bindingRule.fields.BindType.options} disabled=${ro} onValue=${(v) => set('BindType', v)} />
      <${TextField} id="br-name" label=${'Bind name (${value.x} interpolates)'} value=${draft.BindName} readOnly=${ro} onValue=${(v) => set('BindName', v)} />
      ${
        templated || draft.BindVars
          ? html`<${TextField} id="br-var" label="Template variable: name" value=${draft.BindVars?.name} readOnly=${ro}
            onValue=${(v) => set('BindVars', v === '' ? undefined : { ...draft.BindVars, name: v })} />`
          : null
      }
      <${Messages} form=${form} />
      ${ro ? null : html`<${SaveBar} form=${form} cancel=${`#/binding-rules?method=${encodeURIComponent(draft.AuthMethod ?? '')}`} />`}
    </form>`;
}
