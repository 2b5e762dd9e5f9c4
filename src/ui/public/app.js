// The watchword web UI: Preact (the declared package) with htm templates, as plain ES
// modules (no build step; the page's import map names the packages' own files). The secret
// lives in this tab's sessionStorage and travels only in the X-Service-Token header, never
// in a URL. This module is the shell: sign-in, the datacenter switch, the pages and their
// routes; each page lives in its own module.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import {
  ApiError,
  DC_KEY,
  ErrorBox,
  HIDDEN,
  SECRET_KEY,
  api,
  apiPath,
  explain,
  html,
  isObjectID,
  state,
  useLoad,
  useRoute,
} from './lib.js';

/** Pages whose route names an object by its ID (a UUID). */
const ID_PAGES = ['tokens', 'policies', 'roles', 'binding-rules', 'quotas'];
import { TokenList, TokenDetail, TokenForm } from './tokens.js';
import { PolicyList, PolicyEditor, RoleList, RoleEditor, TemplatedPolicies } from './policies.js';
import { AuthMethodForm, AuthMethods, BindingRuleForm, BindingRules } from './auth.js';
import { Datacenters, Servers } from './ops.js';
import { Audit } from './audit.js';
import { WhoCan } from './insight.js';
import { QuotaForm, Quotas } from './quotas.js';
import { Inventory } from './inventory.js';

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
  const settings = await (await fetch('/ui/settings.json')).json();
  state.self = self;
  state.localDC = settings.Datacenter;
  // A token sees secrets (its own included) only with acl:write.
  try {
    const read = await api('GET', apiPath`/v1/acl/token/${self.AccessorID}`, undefined, { dc: '' });
    state.canWrite = read.SecretID !== HIDDEN;
  } catch {
    state.canWrite = false;
  }
  // Pages the token cannot read are not offered: Servers needs operator:read, Audit operator:read and acl:read.
  try {
    const [operator, acl] = await api(
      'POST',
      '/v1/internal/acl/authorize',
      [
        { Resource: 'operator', Access: 'read' },
        { Resource: 'acl', Access: 'read' },
      ],
      { dc: '' },
    );
    state.canOperate = operator.Allow === true;
    state.canAudit = operator.Allow === true && acl.Allow === true;
  } catch {
    // Not known: offered, and a page the token cannot read says so.
    state.canOperate = true;
    state.canAudit = true;
  }
  sessionStorage.setItem(SECRET_KEY, state.secret);
  if (!state.dc) state.dc = state.localDC;
}

// ---- Frame ----

const PAGES = [
  ['tokens', 'Tokens'],
  ['policies', 'Policies'],
  ['roles', 'Roles'],
  ['templated-policies', 'Templated policies'],
  ['who-can', 'Who can'],
  ['auth-methods', 'Auth methods'],
  ['binding-rules', 'Binding rules'],
  ['quotas', 'Quotas'],
  ['inventory', 'Inventory'],
  ['datacenters', 'Datacenters'],
  ['servers', 'Servers', () => state.canOperate],
  ['audit', 'Audit', () => state.canAudit],
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
  const [page, id, sub] = route.parts;
  // A page acts only on the kind it shows, by an ID of that kind: a route holding anything else is refused, not sent on.
  if (ID_PAGES.includes(page) && id !== undefined && id !== 'new' && !isObjectID(id))
    return html`<${ErrorBox} message=${`Not found: ${JSON.stringify(id.slice(0, 80))} is not the ID of one of the ${page}`} />`;
  if (page === 'tokens' && id === 'new') return html`<${TokenForm} />`;
  if (page === 'tokens' && id && sub === 'edit') return html`<${TokenForm} id=${id} />`;
  if (page === 'tokens' && id) return html`<${TokenDetail} id=${id} />`;
  if (page === 'policies' && id) return html`<${PolicyEditor} id=${id} />`;
  if (page === 'policies') return html`<${PolicyList} />`;
  if (page === 'roles' && id) return html`<${RoleEditor} id=${id} />`;
  if (page === 'roles') return html`<${RoleList} />`;
  if (page === 'templated-policies') return html`<${TemplatedPolicies} />`;
  if (page === 'who-can') return html`<${WhoCan} />`;
  if (page === 'auth-methods' && id) return html`<${AuthMethodForm} name=${id} />`;
  if (page === 'auth-methods') return html`<${AuthMethods} />`;
  if (page === 'binding-rules' && id) return html`<${BindingRuleForm} id=${id} method=${route.query.get('method') ?? undefined} />`;
  if (page === 'binding-rules') return html`<${BindingRules} method=${route.query.get('method') ?? undefined} />`;
  if (page === 'quotas' && id) return html`<${QuotaForm} id=${id} />`;
  if (page === 'quotas') return html`<${Quotas} />`;
  if (page === 'inventory') return html`<${Inventory} />`;
  if (page === 'datacenters') return html`<${Datacenters} />`;
  if (page === 'servers') return html`<${Servers} />`;
  if (page === 'audit') return html`<${Audit} query=${route.query} />`;
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
      <nav aria-label="Main">${PAGES.filter(([, , offered]) => !offered || offered()).map(([p, label]) => html`<a href=${`#/${p}`} aria-current=${route.parts[0] === p || (!route.parts[0] && p === 'tokens') ? 'page' : undefined} class=${route.parts[0] === p || (!route.parts[0] && p === 'tokens') ? 'active' : ''}>${label}</a>`)}<a href="/ui/api/">API</a></nav>
      <div class="right">
        <${DatacenterSwitch} onChange=${() => redraw((n) => n + 1)} />
        <span class="muted" data-testid="whoami">${state.self?.Description || state.self?.AccessorID}${state.canWrite ? '' : ' (read-only)'}</span>
        <button type="button" class="secondary" onClick=${signOut}>Sign out</button>
      </div>
    </header>
    <main><${Page} route=${route} key=${`${route.parts.join('/')}?${route.query}@${state.dc}`} /></main>`;
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
