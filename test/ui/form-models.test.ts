import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { fieldsOf } from '../../src/api/ci-object.js';
import { authMethodBody, bindingRuleBody, policyBody, roleBody, tokenBody } from '../../src/api/schemas.js';

interface FieldSpec {
  control: string;
  onEdit?: 'fixed' | 'omit';
}
interface Model {
  fields: Record<string, FieldSpec>;
}
type BodyOf = (model: Model, draft: Record<string, unknown>, editing: boolean) => Record<string, unknown>;

// The UI's form models are a plain ES module the browser loads; read here as it is served.
const MODELS_URL = pathToFileURL(fileURLToPath(new URL('../../src/ui/public/models.js', import.meta.url))).href;
const { MODELS, bodyOf, changed } = (await import(MODELS_URL)) as {
  MODELS: Record<string, Model>;
  bodyOf: BodyOf;
  changed: (m: Model, a: unknown, b: unknown) => boolean;
};

const SCHEMAS: Array<[string, z.ZodType]> = [
  ['token', tokenBody],
  ['policy', policyBody],
  ['role', roleBody],
  ['authMethod', authMethodBody],
  ['bindingRule', bindingRuleBody],
];

/**
 * Every field the API takes today has a form control or an explicit "kept as read" entry (README,
 * "Web UI"); a field added later without one is sent back as read (test/records/every-field.test.ts).
 */
describe('the web UI has a form model for every field of every resource', () => {
  it.each(SCHEMAS)('%s: the model names body fields of the API schema only, and every one a page edits today', (name, schema) => {
    const model = MODELS[name] as Model;
    expect(model, `no form model for ${name}`).toBeDefined();
    const body = [...fieldsOf(schema)];
    expect(Object.keys(model.fields).filter((f) => !body.includes(f))).toEqual([]);
    expect(body.filter((f) => !(f in model.fields))).toEqual([]);
  });

  it('sends back every field of a record as read, links by ID, and sees no change in an unchanged draft', () => {
    const token = {
      AccessorID: 'a1b2c3d4-0000-4000-8000-000000000001',
      SecretID: 'a1b2c3d4-0000-4000-8000-000000000002',
      Description: 'everything set',
      Policies: [{ ID: 'p1', Name: 'one' }],
      Roles: [{ ID: 'r1', Name: 'role' }],
      ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }],
      NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }],
      TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { Name: 'api' }, Datacenters: ['dc1'] }],
      Local: false,
      AuthMethod: 'ci',
      ExpirationTime: '2030-01-01T00:00:00Z',
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 5,
      ModifyIndex: 6,
      Hash: 'h',
      CreateTime: '2026-01-01T00:00:00Z',
    };
    const body = bodyOf(MODELS.token as Model, token, true);
    expect(body).toEqual({
      AccessorID: token.AccessorID,
      SecretID: token.SecretID,
      Description: 'everything set',
      Policies: [{ ID: 'p1' }],
      Roles: [{ ID: 'r1' }],
      ServiceIdentities: token.ServiceIdentities,
      NodeIdentities: token.NodeIdentities,
      TemplatedPolicies: token.TemplatedPolicies,
      Local: false,
      AuthMethod: 'ci',
      ExpirationTime: token.ExpirationTime,
      Namespace: 'default',
      Partition: 'default',
    });
    // Parsed by the server's own schema: nothing it would refuse.
    expect(tokenBody.safeParse(body).success).toBe(true);
    expect(changed(MODELS.token as Model, token, structuredClone(token))).toBe(false);
    expect(changed(MODELS.token as Model, token, { ...structuredClone(token), Policies: [] })).toBe(true);
    // An empty list and an absent one are the same record.
    expect(changed(MODELS.token as Model, { ...token, Policies: undefined }, { ...structuredClone(token), Policies: [] })).toBe(false);
  });
});
