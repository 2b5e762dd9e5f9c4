// The operator's questions (docs/operator-insight.md): who can do something, and what a policy or
// role change would break, shown before it is saved.
import { useState } from 'preact/hooks';
import { ErrorBox, ReasonView, api, explain, html } from './lib.js';

/** The resources a check may name, with their accesses (the decision endpoint's list). */
export const RESOURCES = {
  service: ['read', 'write'],
  key: ['read', 'list', 'write'],
  node: ['read', 'write'],
  intention: ['read', 'write'],
  agent: ['read', 'write'],
  event: ['read', 'write'],
  query: ['read', 'write'],
  session: ['read', 'write'],
  acl: ['read', 'write'],
  operator: ['read', 'write'],
  keyring: ['read', 'write'],
  mesh: ['read', 'write'],
  peering: ['read', 'write'],
};
export const UNSEGMENTED = new Set(['acl', 'operator', 'keyring', 'mesh', 'peering']);

/** A check's three fields (resource, name, access), as the permission test and who-can ask them. */
export function CheckFields({ idPrefix, check, onChange }) {
  const segmented = !UNSEGMENTED.has(check.Resource);
  const change = (field) => (e) => {
    const next = { ...check, [field]: e.target.value };
    if (field === 'Resource' && !RESOURCES[next.Resource].includes(next.Access)) next.Access = 'read';
    onChange(next);
  };
  return html`<div><label for=${`${idPrefix}-resource`}>Resource</label>
      <select id=${`${idPrefix}-resource`} value=${check.Resource} onChange=${change('Resource')}>${Object.keys(RESOURCES).map((r) => html`<option value=${r}>${r}</option>`)}</select></div>
    ${segmented ? html`<div><label for=${`${idPrefix}-segment`}>Name</label><input id=${`${idPrefix}-segment`} placeholder="web" value=${check.Segment} onInput=${change('Segment')} /></div>` : null}
    <div><label for=${`${idPrefix}-access`}>Access</label>
      <select id=${`${idPrefix}-access`} value=${check.Access} onChange=${change('Access')}>${RESOURCES[check.Resource].map((a) => html`<option value=${a}>${a}</option>`)}</select></div>`;
}

const checkText = (c) => `${c.Resource}${c.Segment !== undefined && c.Segment !== '' ? ` “${c.Segment}”` : ''} ${c.Access}`;

/** Who can: the roles and tokens of this place granted a check, each with the rule that grants it; tokens a page at a time. */
export function WhoCan() {
  const [check, setCheck] = useState({ Resource: 'service', Segment: '', Access: 'write' });
  const [answer, setAnswer] = useState(undefined);
  const [error, setError] = useState('');
  const ask = async (cursor) => {
    setError('');
    try {
      const q = new URLSearchParams({ resource: check.Resource, access: check.Access, limit: '100' });
      if (!UNSEGMENTED.has(check.Resource)) q.set('segment', check.Segment);
      if (cursor) q.set('cursor', cursor);
      const page = await api('GET', `/v1/acl/who-can?${q}`);
      setAnswer((prev) => (cursor && prev ? { ...page, Roles: prev.Roles, Tokens: [...prev.Tokens, ...page.Tokens] } : page));
    } catch (err) {
      setAnswer(undefined);
      setError(explain(err));
    }
  };
  return html`<h1>Who can</h1>
    <p class="muted">The tokens and roles of this namespace that may do something, each with the rule that grants it.</p>
    <form class="filters" data-testid="who-can-form" onSubmit=${(e) => {
      e.preventDefault();
      setAnswer(undefined);
      void ask();
    }}>
      <${CheckFields} idPrefix="who" check=${check} onChange=${(c) => {
        setAnswer(undefined);
        setCheck(c);
      }} />
      <div><button type="submit">Ask</button></div>
    </form>
    <${ErrorBox} message=${error} />
    ${
      answer === undefined
        ? null
        : html`<section data-testid="who-can-answer">
      <h2>Roles that grant ${checkText(answer)}</h2>
      ${(answer.Roles ?? []).length === 0 ? html`<p class="muted">None.</p>` : html`<ul class="plain">${answer.Roles.map((r) => html`<li><a href=${`#/roles/${r.ID}`}>${r.Name}</a><${ReasonView} reason=${r.Reason} /></li>`)}</ul>`}
      <h2>Tokens</h2>
      ${
        answer.Tokens.length === 0
          ? html`<p class="muted">None${answer.NextCursor ? ' in this part; ask for more' : ''}.</p>`
          : html`<div class="table-wrap"><table data-testid="who-can-tokens"><thead><tr><th>AccessorID</th><th>Description</th><th>Why</th></tr></thead>
        <tbody>${answer.Tokens.map((t) => html`<tr><td><a href=${`#/tokens/${t.AccessorID}`}>${t.AccessorID}</a></td><td>${t.Description}${t.Local ? html` <span class="badge">local</span>` : null}</td><td><${ReasonView} reason=${t.Reason} /></td></tr>`)}</tbody></table></div>`
      }
      ${answer.NextCursor ? html`<div class="actions"><button type="button" class="secondary" onClick=${() => ask(answer.NextCursor)}>More</button></div>` : null}
    </section>`
    }`;
}

/** What a change would break: the answer of a dry run, shown before the change is saved. */
export function DryRunResult({ result, onSave, onCancel }) {
  if (!result) return null;
  const flips = result.Flips ?? [];
  return html`<section class="dry-run" data-testid="dry-run" aria-live="polite">
    <h2>What this change would break</h2>
    <p>It reaches <strong>${result.Tokens}</strong> token${result.Tokens === 1 ? '' : 's'}; ${result.TokensWithChecks} of them were asked about ${result.Checks} check${result.Checks === 1 ? '' : 's'} in the last hour${result.NotRecorded ? ` (${result.NotRecorded} checks were not recorded)` : ''}.</p>
    ${
      result.OutOfScope
        ? html`<p data-testid="dry-run-out-of-scope">${result.OutOfScope.Tokens} of them live where your token may not read; ${result.OutOfScope.Flipping} of those would see an answer change (not shown).</p>`
        : null
    }
    ${
      flips.length === 0
        ? html`<p data-testid="dry-run-none">No check asked in the last hour would change its answer.</p>`
        : html`<div class="table-wrap"><table data-testid="dry-run-flips"><thead><tr><th>Check</th><th>Answer</th><th>Tokens</th><th>For example</th></tr></thead>
      <tbody>${flips.map((f) => html`<tr><td>${checkText(f)}</td><td class=${f.To ? 'allow' : 'deny'}>${f.From ? 'allow' : 'deny'} → ${f.To ? 'allow' : 'deny'}</td><td>${f.Tokens}</td><td><a href=${`#/tokens/${f.Example}`}>${f.Example}</a></td></tr>`)}</tbody></table></div>`
    }
    <div class="actions">${onSave ? html`<button type="button" data-testid="save-anyway" onClick=${onSave}>${flips.length ? 'Save anyway' : 'Save'}</button>` : null}<button type="button" class="secondary" onClick=${onCancel}>Keep editing</button></div>
  </section>`;
}

/** Runs a dry run of an update with `body`; the answer, or throws what the update would refuse. */
export const dryRun = (path, body) => api('PUT', `${path}?dry-run`, body);
