// The watchword web UI: Preact with htm templates, as plain ES modules (no build step).
// The secret lives in this tab's sessionStorage and travels only in the X-Service-Token
// header, never in a URL. This module is the shell: sign-in, the datacenter switch, the
// pages and their routes; each page lives in its own module.
import { html, render, useEffect, useState } from '/ui/vendor/htm/standalone.module.js';
import { ApiError, DC_KEY, ErrorBox, HIDDEN, Loading, SECRET_KEY, api, explain, state, useLoad, useRoute } from './lib.js';
import { TokenList, TokenDetail, TokenForm } from './tokens.js';
import { PolicyList, PolicyEditor, RoleList, RoleEditor, TemplatedPolicies } from './policies.js';
import { AuthMethods, BindingRules } from './auth.js';

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
