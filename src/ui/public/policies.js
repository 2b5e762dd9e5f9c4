// Policies (an editor that points at a parse error), roles, and templated policies with their preview.
import { useState } from 'preact/hooks';
import {
  ErrorBox,
  Loading,
  api,
  apiPath,
  confirmThen,
  explain,
  go,
  html,
  identities,
  isBuiltinID,
  state,
  useLoad,
  useSearch,
} from './lib.js';
import {
  LinkChecks,
  ListField,
  MODELS,
  Messages,
  NodeIdentities,
  ServiceIdentities,
  TemplatedPolicies as TemplatedPolicyRows,
  TextArea,
  TextField,
  bodyOf,
  changed,
  useChoices,
  useRecordForm,
} from './forms.js';
import { DryRunResult, dryRun } from './insight.js';

export function PolicyList() {
  const list = useLoad(() => api('GET', '/v1/acl/policies'), []);
  return html`<h1>Policies</h1>
    ${state.canWrite ? html`<div class="actions"><a class="button" href="#/policies/new">Create policy</a></div>` : null}
    <${Loading} result=${list}>${(ps) => html`<${PolicyTable} policies=${ps} />`}<//>`;
}

function PolicyTable({ policies }) {
  const [shown, box] = useSearch(policies, (p) => `${p.Name} ${p.Description}`);
  return html`<div class="filters">${box}</div>
    <div class="table-wrap"><table data-testid="policy-table"><thead><tr><th>Name</th><th>Description</th><th>Datacenters</th></tr></thead>
      <tbody>${shown.map((p) => html`<tr><td><a href=${`#/policies/${p.ID}`}>${p.Name}</a>${isBuiltinID(p.ID) ? html` <span class="badge">built-in</span>` : null}</td><td>${p.Description}</td><td>${(p.Datacenters ?? []).join(', ') || 'all'}</td></tr>`)}</tbody></table></div>
    <p class="muted">${shown.length} of ${policies.length} policies</p>`;
}

/** The line and column of a rules parse error (`At 2:5: …`), shown under the editor. */
export function ParseError({ message, rules }) {
  const m = /At (\d+):(\d+)/.exec(message ?? '');
  if (!message) return null;
  if (!m) return html`<${ErrorBox} message=${message} />`;
  const line = Number(m[1]);
  const col = Number(m[2]);
  const text = (rules ?? '').split('\n')[line - 1] ?? '';
  return html`<div class="error" role="alert" data-testid="policy-error">${message}
    <div>Line ${line}, column ${col}:</div><div class="where"><div>${text || ' '}</div><div>${' '.repeat(Math.max(0, col - 1))}^</div></div></div>`;
}

/** Tokens (and roles) that link an object: who a change here reaches. */
function UsedBy({ filter, id, roles }) {
  const tokens = useLoad(() => api('GET', `/v1/acl/tokens?${filter}=${encodeURIComponent(id)}`), [id]);
  const rs = useLoad(() => (roles ? api('GET', `/v1/acl/roles?policy=${encodeURIComponent(id)}`) : Promise.resolve([])), [id]);
  return html`<h2>Used by</h2>
    <${Loading} result=${tokens}>${(
      ts,
    ) => html`<p data-testid="used-by-tokens">${ts.length === 0 ? 'No token links it directly.' : html`${ts.length} token${ts.length === 1 ? '' : 's'}: `}
      ${ts.slice(0, 50).map((t, i) => html`${i ? ', ' : ''}<a href=${`#/tokens/${t.AccessorID}`}>${t.Description || t.AccessorID}</a>`)}${ts.length > 50 ? ', …' : ''}</p>`}<//>
    ${
      roles
        ? html`<${Loading} result=${rs}>${(
            list,
          ) => html`<p data-testid="used-by-roles">${list.length === 0 ? 'No role links it.' : html`${list.length} role${list.length === 1 ? '' : 's'}: `}
      ${list.map((r, i) => html`${i ? ', ' : ''}<a href=${`#/roles/${r.ID}`}>${r.Name}</a>`)}</p>`}<//>`
        : null
    }`;
}

const NEW_POLICY = { Name: '', Description: '', Rules: '' };

export function PolicyEditor({ id }) {
  const creating = id === 'new';
  const form = useRecordForm(MODELS.policy, creating ? undefined : () => api('GET', apiPath`/v1/acl/policy/${id}`), NEW_POLICY, [id]);
  const { draft, set, original } = form;
  const builtin = isBuiltinID(id);
  const ro = !state.canWrite;
  const [preview, setPreview] = useState(undefined);
  const save = async () => {
    setPreview(undefined);
    const p = await form.save((body) => (creating ? api('PUT', '/v1/acl/policy', body) : api('PUT', apiPath`/v1/acl/policy/${id}`, body)));
    if (p) {
      form.setNotice(`Saved policy “${p.Name}”.`);
      if (creating) go(`#/policies/${p.ID}`);
    }
  };
  // An edit is shown what it would break first (the checks asked in the last hour that would flip); nothing flips: saved at once.
  const submit = (e) => {
    e.preventDefault();
    if (creating) return save();
    return previewThen(MODELS.policy, form, (body) => dryRun(apiPath`/v1/acl/policy/${id}`, body), setPreview, save);
  };
  const remove = () =>
    confirmThen(`Delete policy ${draft.Name}?`, async () => {
      try {
        await api('DELETE', apiPath`/v1/acl/policy/${id}`);
        go('#/policies');
      } catch (err) {
        form.setError(explain(err));
      }
    });
  if (draft === undefined)
    return html`<h1>Policy</h1><${Messages} form=${form} />${form.error ? null : html`<p class="muted">Loading…</p>`}`;
  // A rules error points at its line; other errors are said in plain words.
  const rulesError = /At \d+:\d+/.test(form.error) ? form.error : '';
  return html`<h1>${creating ? 'Create policy' : `Policy “${original?.Name ?? draft.Name}”`}</h1>
    ${builtin ? html`<p class="notice" data-testid="builtin-note">A built-in policy: its rules and datacenters cannot change and it cannot be deleted; its name and description may.</p>` : null}
    <form onSubmit=${submit} data-testid="policy-form">
      <${TextField} id="p-name" label="Name" value=${draft.Name} readOnly=${ro} onValue=${(v) => set('Name', v)} />
      <${TextField} id="p-desc" label="Description" value=${draft.Description} readOnly=${ro} onValue=${(v) => set('Description', v)} />
      <${TextArea} id="p-rules" label="Rules (HCL or JSON)" rows="12" value=${draft.Rules} readOnly=${ro || builtin} onValue=${(v) => set('Rules', v)} />
      <${ListField} id="p-dcs" label="Valid in datacenters (empty: all)" placeholder="dc1, dc2" value=${draft.Datacenters} readOnly=${ro || builtin} onValue=${(v) => set('Datacenters', v)} />
      ${rulesError ? html`<${ParseError} message=${rulesError} rules=${draft.Rules} />` : html`<${Messages} form=${form} />`}
      ${ro || preview ? null : html`<div class="actions"><button type="submit">${creating ? 'Create' : 'Save'}</button>${creating || builtin ? null : html`<button type="button" class="danger" onClick=${remove}>Delete</button>`}</div>`}
    </form>
    <${DryRunResult} result=${preview} onSave=${save} onCancel=${() => setPreview(undefined)} />
    ${
      creating
        ? null
        : html`<dl class="kv small"><dt>ID</dt><dd>${id}</dd><dt>Namespace</dt><dd>${draft.Namespace} / ${draft.Partition}</dd><dt>Hash</dt><dd>${draft.Hash}</dd></dl>
      <${UsedBy} filter="policy" id=${id} roles=${true} />`
    }`;
}

/**
 * Before an edit is saved: its dry run. A change that flips no check asked in the last hour is
 * saved at once; one that would is shown (`setPreview`) for the operator to save anyway or not.
 * What the update would refuse is said as the save would say it.
 */
async function previewThen(model, form, run, setPreview, save) {
  if (!changed(model, form.original, form.draft)) return save();
  try {
    const result = await run(bodyOf(model, form.draft, true));
    if ((result.Flips ?? []).length === 0 && result.NotRecorded === 0 && !result.OutOfScope?.Flipping) return save();
    setPreview(result);
  } catch (err) {
    form.setError(explain(err));
  }
}

// ---- Roles ----

export function RoleList() {
  const list = useLoad(() => api('GET', '/v1/acl/roles'), []);
  return html`<h1>Roles</h1>
    ${state.canWrite ? html`<div class="actions"><a class="button" href="#/roles/new">Create role</a></div>` : null}
    <${Loading} result=${list}>${(rs) => html`<${RoleTable} roles=${rs} />`}<//>`;
}

function RoleTable({ roles }) {
  const [shown, box] = useSearch(roles, (r) => `${r.Name} ${r.Description}`);
  return html`<div class="filters">${box}</div>
    <div class="table-wrap"><table data-testid="role-table"><thead><tr><th>Name</th><th>Description</th><th>Policies</th><th>Identities</th></tr></thead>
      <tbody>${shown.map((r) => html`<tr><td><a href=${`#/roles/${r.ID}`}>${r.Name}</a></td><td>${r.Description}</td><td>${(r.Policies ?? []).map((p) => p.Name).join(', ')}</td><td>${identities(r).join('; ')}</td></tr>`)}</tbody></table></div>
    <p class="muted">${shown.length} of ${roles.length} roles</p>`;
}

const NEW_ROLE = { Name: '', Description: '' };

export function RoleEditor({ id }) {
  const creating = id === 'new';
  const form = useRecordForm(MODELS.role, creating ? undefined : () => api('GET', apiPath`/v1/acl/role/${id}`), NEW_ROLE, [id]);
  const choices = useChoices();
  const { draft, set, original } = form;
  const ro = !state.canWrite;
  const [preview, setPreview] = useState(undefined);
  const save = async () => {
    setPreview(undefined);
    const r = await form.save((body) => (creating ? api('PUT', '/v1/acl/role', body) : api('PUT', apiPath`/v1/acl/role/${id}`, body)));
    if (r) {
      form.setNotice(`Saved role “${r.Name}”.`);
      if (creating) go(`#/roles/${r.ID}`);
    }
  };
  const submit = (e) => {
    e.preventDefault();
    if (creating) return save();
    return previewThen(MODELS.role, form, (body) => dryRun(apiPath`/v1/acl/role/${id}`, body), setPreview, save);
  };
  const remove = () =>
    confirmThen(`Delete role ${draft.Name}?`, () =>
      api('DELETE', apiPath`/v1/acl/role/${id}`).then(
        () => go('#/roles'),
        (err) => form.setError(explain(err)),
      ),
    );
  if (draft === undefined) return html`<h1>Role</h1><${Messages} form=${form} />${form.error ? null : html`<p class="muted">Loading…</p>`}`;
  return html`<h1>${creating ? 'Create role' : `Role “${original?.Name ?? draft.Name}”`}</h1>
    <form onSubmit=${submit} data-testid="role-form">
      <${TextField} id="r-name" label="Name" readOnly=${ro} value=${draft.Name} onValue=${(v) => set('Name', v)} />
      <${TextField} id="r-desc" label="Description" readOnly=${ro} value=${draft.Description} onValue=${(v) => set('Description', v)} />
      <${LinkChecks} label="Policies" all=${choices.policies} value=${draft.Policies} disabled=${ro} onValue=${(v) => set('Policies', v)} />
      <${ServiceIdentities} id="r-si" value=${draft.ServiceIdentities} disabled=${ro} onValue=${(v) => set('ServiceIdentities', v)} />
      <${NodeIdentities} id="r-ni" value=${draft.NodeIdentities} disabled=${ro} onValue=${(v) => set('NodeIdentities', v)} />
      <${TemplatedPolicyRows} id="r-tp" value=${draft.TemplatedPolicies} templates=${choices.templates} disabled=${ro} onValue=${(v) => set('TemplatedPolicies', v)} />
      <${Messages} form=${form} />
      ${ro || preview ? null : html`<div class="actions"><button type="submit">${creating ? 'Create' : 'Save'}</button>${creating ? null : html`<button type="button" class="danger" onClick=${remove}>Delete</button>`}</div>`}
    </form>
    <${DryRunResult} result=${preview} onSave=${save} onCancel=${() => setPreview(undefined)} />
    ${creating ? null : html`<${UsedBy} filter="role" id=${id} roles=${false} />`}`;
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
      setPreview({ policy: await api('POST', apiPath`/v1/acl/templated-policy/preview/${chosen}`, { Name: name }) });
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
