// One form model per resource: the fields its API body takes (src/api/schemas.ts) that a page
// shows, each edited by a control or kept as it was read. An edit starts from the record it read
// and changes only what a control changed; a field with no entry here is sent back as read, so a
// form cannot drop what it does not show (test/records/every-field.test.ts pushes a record with
// every field through the UI's save).
//
// A field: { control, onEdit? }. control 'kept' is sent back as read and never edited.
// onEdit 'fixed': shown but not editable once created (sent as read); 'omit': a create-only
// input that an update does not send.

export const MODELS = {
  token: {
    fields: {
      AccessorID: { control: 'kept' },
      SecretID: { control: 'kept' },
      Description: { control: 'text' },
      Policies: { control: 'links', of: 'policies' },
      Roles: { control: 'links', of: 'roles' },
      ServiceIdentities: { control: 'service-identities' },
      NodeIdentities: { control: 'node-identities' },
      TemplatedPolicies: { control: 'templated-policies' },
      Local: { control: 'boolean', onEdit: 'fixed' },
      AuthMethod: { control: 'kept' },
      AuthMethodNamespace: { control: 'kept' },
      ExpirationTime: { control: 'kept' },
      ExpirationTTL: { control: 'duration', onEdit: 'omit' },
      Namespace: { control: 'kept' },
      Partition: { control: 'kept' },
    },
  },
  policy: {
    fields: {
      ID: { control: 'kept' },
      Name: { control: 'text' },
      Description: { control: 'text' },
      Rules: { control: 'rules' },
      Datacenters: { control: 'list' },
      Namespace: { control: 'kept' },
      Partition: { control: 'kept' },
    },
  },
  role: {
    fields: {
      ID: { control: 'kept' },
      Name: { control: 'text' },
      Description: { control: 'text' },
      Policies: { control: 'links', of: 'policies' },
      ServiceIdentities: { control: 'service-identities' },
      NodeIdentities: { control: 'node-identities' },
      TemplatedPolicies: { control: 'templated-policies' },
      Namespace: { control: 'kept' },
      Partition: { control: 'kept' },
    },
  },
  authMethod: {
    fields: {
      Name: { control: 'text', onEdit: 'fixed' },
      Type: { control: 'select', options: ['jwt', 'kubernetes'], onEdit: 'fixed' },
      DisplayName: { control: 'text' },
      Description: { control: 'text' },
      MaxTokenTTL: { control: 'duration' },
      TokenIdleTTL: { control: 'duration' },
      TokenLocality: { control: 'select', options: ['local', 'global'] },
      Config: { control: 'config' },
      NamespaceRules: { control: 'kept' },
      Namespace: { control: 'kept' },
      Partition: { control: 'kept' },
    },
  },
  bindingRule: {
    fields: {
      ID: { control: 'kept' },
      Description: { control: 'text' },
      AuthMethod: { control: 'select', onEdit: 'fixed' },
      Selector: { control: 'text' },
      BindType: { control: 'select', options: ['service', 'node', 'role', 'policy', 'templated-policy'] },
      BindName: { control: 'text' },
      BindVars: { control: 'bind-vars' },
      Namespace: { control: 'kept' },
      Partition: { control: 'kept' },
    },
  },
  quota: {
    fields: {
      ID: { control: 'kept' },
      Name: { control: 'text' },
      Description: { control: 'text' },
      AuthMethod: { control: 'scope' },
      Namespace: { control: 'scope' },
      Partition: { control: 'scope' },
      MaxTokens: { control: 'number' },
      MaxTokenTTL: { control: 'duration' },
      MinTokenTTL: { control: 'duration' },
      Local: { control: 'boolean', onEdit: 'fixed' },
      // A count the server answers with, not a field of the quota: sent back, the API ignores it.
      Used: { control: 'kept' },
    },
  },
};

/** Fields every record's server sets (and takes back ignored): left out of a body, so it shows only what a write gives. */
const SERVER_SET = new Set(['CreateIndex', 'ModifyIndex', 'Hash', 'CreateTime']);

/** Fields whose values are the caller's own data, kept exactly as they are (an empty list in a Config stays). */
const OPAQUE = new Set(['Config', 'TemplateVariables', 'BindVars']);

/** Drops what the API leaves out anyway (empty lists, unset values), so equal records compare equal. */
function tidy(value) {
  if (Array.isArray(value)) return value.map(tidy);
  if (value !== null && typeof value === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) continue;
      out[k] = OPAQUE.has(k) ? v : tidy(v);
    }
    return out;
  }
  return value;
}

/**
 * The body a form sends: every field of the draft (the record as read, with the controls'
 * changes), those the model names as its controls say, and any other field as it was read:
 * a field this page has no control for is sent back unchanged, never dropped (the server takes
 * the fields it sets, echoed back, and ignores them). Links go by ID (names are resolved on
 * every read anyway).
 */
export function bodyOf(model, draft, editing) {
  const body = {};
  for (const [name, value] of Object.entries(draft)) {
    if (SERVER_SET.has(name) && !(name in model.fields)) continue;
    const spec = model.fields[name] ?? { control: 'kept' };
    if (editing && spec.onEdit === 'omit') continue;
    let v = value;
    if (v === undefined || v === null || v === '<hidden>') continue;
    if (spec.control === 'links') v = v.map((l) => ({ ID: l.ID }));
    if (!editing && spec.control === 'duration' && v === '') continue;
    body[name] = v;
  }
  return tidy(body);
}

/** Whether saving `draft` would change the record read as `original`. */
export function changed(model, original, draft) {
  return JSON.stringify(bodyOf(model, original, true)) !== JSON.stringify(bodyOf(model, draft, true));
}
