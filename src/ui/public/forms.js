// Form controls and the record-form engine. A form edits a draft that starts as the record it
// read (models.js): each control changes one field in place, what no control shows is sent
// back as read, and saving an unchanged draft writes nothing. Inputs that parse their text
// (lists, maps) keep what is typed as typed, so a half-typed "dc1," is not reformatted away.
import { useEffect, useState } from 'preact/hooks';
import { MODELS, bodyOf, changed } from './models.js';
import { ErrorBox, Notice, api, explain, html } from './lib.js';

export { MODELS, bodyOf, changed };

/**
 * A form over one record: `load` reads it (absent: a new one from `initial`). Returns the draft,
 * a setter per field, and `save(send)` that writes only when something changed.
 */
export function useRecordForm(model, load, initial, deps) {
  const editing = load !== undefined;
  const [original, setOriginal] = useState(editing ? undefined : initial);
  const [draft, setDraft] = useState(editing ? undefined : initial);
  const [error, setError] = useState('');
  const [notice, setNotice] = useState('');
  useEffect(() => {
    if (!editing) return;
    load().then(
      (r) => {
        setOriginal(r);
        setDraft(structuredClone(r));
      },
      (err) => setError(explain(err)),
    );
  }, deps);
  const set = (name, value) => setDraft((d) => ({ ...d, [name]: value }));
  const save = async (send) => {
    setError('');
    setNotice('');
    if (editing && !changed(model, original, draft)) {
      setNotice('No changes: nothing was written.');
      return undefined;
    }
    try {
      const saved = await send(bodyOf(model, draft, editing));
      // The record as now stored is what the next edit starts from.
      if (saved && typeof saved === 'object') {
        setOriginal(saved);
        setDraft(structuredClone(saved));
      }
      return saved;
    } catch (err) {
      setError(explain(err));
      return undefined;
    }
  };
  return { editing, original, draft, set, setDraft, save, error, setError, notice, setNotice };
}

export function Messages({ form }) {
  return html`<${ErrorBox} message=${form.error} /><${Notice} message=${form.notice} />`;
}

export function TextField({ id, label, value, onValue, readOnly, placeholder, type, hint }) {
  return html`<div class="field"><label for=${id}>${label}</label>
    <input id=${id} type=${type ?? 'text'} value=${value ?? ''} readOnly=${readOnly} placeholder=${placeholder} autocomplete="off" onInput=${(e) => onValue(e.target.value)} />
    ${hint ? html`<div class="hint">${hint}</div>` : null}</div>`;
}

export function TextArea({ id, label, value, onValue, readOnly, rows, hint }) {
  return html`<div class="field"><label for=${id}>${label}</label>
    <textarea id=${id} rows=${rows ?? 6} readOnly=${readOnly} spellcheck="false" onInput=${(e) => onValue(e.target.value)} value=${value ?? ''}></textarea>
    ${hint ? html`<div class="hint">${hint}</div>` : null}</div>`;
}

/** A select whose every option carries its value (what reaches the API is what is shown). */
export function SelectField({ id, label, value, options, onValue, disabled, hint }) {
  const opts = options.map((o) => (typeof o === 'string' ? { value: o, label: o } : o));
  return html`<div class="field"><label for=${id}>${label}</label>
    <select id=${id} value=${value ?? ''} disabled=${disabled} onChange=${(e) => onValue(e.target.value)}>
      ${opts.map((o) => html`<option value=${o.value} selected=${o.value === (value ?? '')}>${o.label}</option>`)}
    </select>${hint ? html`<div class="hint">${hint}</div>` : null}</div>`;
}

export function CheckField({ id, label, checked, onValue, disabled, hint }) {
  return html`<div class="field checks"><label for=${id}><input type="checkbox" id=${id} checked=${!!checked} disabled=${disabled} onChange=${(e) => onValue(e.target.checked)} /> ${label}</label>
    ${hint ? html`<div class="hint">${hint}</div>` : null}</div>`;
}

const splitList = (text) =>
  text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
const sameList = (a, b) => JSON.stringify(a ?? []) === JSON.stringify(b ?? []);

/**
 * A list typed as "a, b, c". What is typed stays as typed; the list it means goes to the draft
 * (undefined when empty). A value changed elsewhere (the JSON editor) replaces the text.
 */
export function ListField({ id, label, value, onValue, readOnly, placeholder, hint }) {
  const [text, setText] = useState((value ?? []).join(', '));
  useEffect(() => {
    if (!sameList(splitList(text), value)) setText((value ?? []).join(', '));
  }, [JSON.stringify(value ?? [])]);
  return html`<div class="field"><label for=${id}>${label}</label>
    <input id=${id} value=${text} readOnly=${readOnly} placeholder=${placeholder} autocomplete="off" onInput=${(e) => {
      setText(e.target.value);
      const list = splitList(e.target.value);
      onValue(list.length > 0 ? list : undefined);
    }} />${hint ? html`<div class="hint">${hint}</div>` : null}</div>`;
}

const mapText = (m) =>
  Object.entries(m ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join('\n');
function parseMap(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

/** A map typed one `key=value` per line. */
export function MapField({ id, label, value, onValue, hint }) {
  const [text, setText] = useState(mapText(value));
  useEffect(() => {
    if (JSON.stringify(parseMap(text)) !== JSON.stringify(value ?? {})) setText(mapText(value));
  }, [JSON.stringify(value ?? {})]);
  return html`<div class="field"><label for=${id}>${label}</label>
    <textarea id=${id} rows="3" spellcheck="false" value=${text} onInput=${(e) => {
      setText(e.target.value);
      const m = parseMap(e.target.value);
      onValue(Object.keys(m).length > 0 ? m : undefined);
    }}></textarea>${hint ? html`<div class="hint">${hint}</div>` : null}</div>`;
}

const PEM = /-----BEGIN [^-]+-----[\s\S]*?-----END [^-]+-----/g;
const pemText = (list) => (list ?? []).join('\n');

/** PEM blocks, one after another. */
export function PemListField({ id, label, value, onValue, hint }) {
  const [text, setText] = useState(pemText(value));
  useEffect(() => {
    if (!sameList(text.match(PEM) ?? [], value)) setText(pemText(value));
  }, [JSON.stringify(value ?? [])]);
  return html`<div class="field"><label for=${id}>${label}</label>
    <textarea id=${id} rows="4" spellcheck="false" value=${text} onInput=${(e) => {
      setText(e.target.value);
      const blocks = e.target.value.match(PEM) ?? [];
      onValue(blocks.length > 0 ? blocks : undefined);
    }}></textarea>${hint ? html`<div class="hint">${hint}</div>` : null}</div>`;
}

/** Links to policies or roles: one box each, checked when linked. Links to objects not listed are kept and shown too. */
export function LinkChecks({ label, all, value, onValue, disabled }) {
  const chosen = value ?? [];
  const listed = new Set(all.map((o) => o.ID));
  const options = [...all, ...chosen.filter((l) => !listed.has(l.ID))];
  return html`<fieldset class="field"><legend>${label}</legend><div class="checks" role="group" aria-label=${label}>
    ${options.length === 0 ? html`<span class="muted">none exist yet</span>` : null}
    ${options.map(
      (o) =>
        html`<label><input type="checkbox" disabled=${disabled} checked=${chosen.some((l) => l.ID === o.ID)} onChange=${(e) =>
          onValue(
            e.target.checked ? [...chosen, { ID: o.ID, Name: o.Name }] : chosen.filter((l) => l.ID !== o.ID),
          )} /> ${o.Name ?? o.ID}</label>`,
    )}
  </div></fieldset>`;
}

/** Rows of an identity list, each edited in place; rows can be added and removed. */
function Rows({ legend, id, rows, onValue, blank, render, disabled }) {
  const list = rows ?? [];
  const change = (i, row) => onValue(list.map((r, j) => (j === i ? row : r)));
  return html`<fieldset class="field rows"><legend>${legend}</legend>
    ${list.length === 0 ? html`<div class="muted">none</div>` : null}
    ${list.map(
      (row, i) => html`<div class="row" data-testid=${`${id}-row`}>${render(row, i, (r) => change(i, r))}
      ${disabled ? null : html`<button type="button" class="secondary small" aria-label=${`Remove ${legend} ${i + 1}`} onClick=${() => onValue(list.filter((_, j) => j !== i))}>Remove</button>`}</div>`,
    )}
    ${disabled ? null : html`<button type="button" class="secondary small" data-testid=${`${id}-add`} onClick=${() => onValue([...list, blank()])}>Add</button>`}
  </fieldset>`;
}

/** Fields of one object, with an optional one dropped when it is empty (the API omits empty lists). */
const withOptional = (row, key, value) => {
  const next = { ...row };
  if (value === undefined) delete next[key];
  else next[key] = value;
  return next;
};

export function ServiceIdentities({ id, value, onValue, disabled, local }) {
  return html`<${Rows} legend="Service identities" id=${id} rows=${value} onValue=${onValue} disabled=${disabled} blank=${() => ({ ServiceName: '' })}
    render=${(row, i, set) => html`
      <${TextField} id=${`${id}-${i}-name`} label="Service name" value=${row.ServiceName} readOnly=${disabled} onValue=${(v) => set({ ...row, ServiceName: v })} />
      ${local ? null : html`<${ListField} id=${`${id}-${i}-dcs`} label="Datacenters (empty: all)" value=${row.Datacenters} readOnly=${disabled} placeholder="dc1, dc2" onValue=${(v) => set(withOptional(row, 'Datacenters', v))} />`}`} />`;
}

export function NodeIdentities({ id, value, onValue, disabled }) {
  return html`<${Rows} legend="Node identities" id=${id} rows=${value} onValue=${onValue} disabled=${disabled} blank=${() => ({ NodeName: '', Datacenter: '' })}
    render=${(row, i, set) => html`
      <${TextField} id=${`${id}-${i}-name`} label="Node name" value=${row.NodeName} readOnly=${disabled} onValue=${(v) => set({ ...row, NodeName: v })} />
      <${TextField} id=${`${id}-${i}-dc`} label="Datacenter" value=${row.Datacenter} readOnly=${disabled} onValue=${(v) => set({ ...row, Datacenter: v })} />`} />`;
}

/** Templated policies: the template, its Name variable when it takes one, and datacenters. */
export function TemplatedPolicies({ id, value, onValue, templates, disabled }) {
  const names = Object.keys(templates ?? {});
  const needsName = (t) => (templates?.[t]?.Schema ?? '').includes('"name"');
  return html`<${Rows} legend="Templated policies" id=${id} rows=${value} onValue=${onValue} disabled=${disabled} blank=${() => ({ TemplateName: names[0] ?? 'builtin/service' })}
    render=${(row, i, set) => html`
      <${SelectField} id=${`${id}-${i}-template`} label="Template" value=${row.TemplateName} disabled=${disabled}
        options=${names.includes(row.TemplateName) ? names : [row.TemplateName, ...names]} onValue=${(v) => set({ ...row, TemplateName: v })} />
      ${
        needsName(row.TemplateName) || (row.TemplateVariables?.name ?? row.TemplateVariables?.Name) !== undefined
          ? html`<${TextField} id=${`${id}-${i}-var`} label="Name variable" value=${row.TemplateVariables?.name ?? row.TemplateVariables?.Name} readOnly=${disabled}
            onValue=${(v) => set({ ...row, TemplateVariables: { name: v } })} />`
          : null
      }
      <${ListField} id=${`${id}-${i}-dcs`} label="Datacenters (empty: all)" value=${row.Datacenters} readOnly=${disabled} placeholder="dc1" onValue=${(v) => set(withOptional(row, 'Datacenters', v))} />`} />`;
}

/** The buttons under a form. */
export function SaveBar({ form, cancel, label }) {
  return html`<div class="actions"><button type="submit">${label ?? (form.editing ? 'Save' : 'Create')}</button>${cancel ? html`<a class="button secondary" href=${cancel}>Cancel</a>` : null}</div>`;
}

/** Loads what link pickers and template rows offer. */
export function useChoices() {
  const [choices, setChoices] = useState({ policies: [], roles: [], templates: {} });
  useEffect(() => {
    Promise.all([
      api('GET', '/v1/acl/policies').catch(() => []),
      api('GET', '/v1/acl/roles').catch(() => []),
      api('GET', '/v1/acl/templated-policies').catch(() => ({})),
    ]).then(([policies, roles, templates]) => setChoices({ policies, roles, templates }));
  }, []);
  return choices;
}
