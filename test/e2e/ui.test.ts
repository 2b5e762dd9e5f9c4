import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exportSPKI, generateKeyPair } from 'jose';
import { type Browser, type Page, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Authorizer } from '../../src/client/authorizer.js';
import { type Cluster, startCluster } from '../../src/testing/index.js';
import { createCA } from '../../src/transport/certs.js';

// The web UI in a real browser (Debian's chromium, driven by playwright-core): every form keeps
// every field of what it edits, every select and every keystroke reaches the API, the operator's
// round trip through policies, roles and tokens, a read-only sign-in, the datacenters page with
// its lag chart, the servers page, accessibility (axe-core) and what the pages may load and send.

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser', process.env.WATCHWORD_CHROMIUM ?? ''].find((p) => p && existsSync(p));
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
/** The page's document, inside page.evaluate (this project's TypeScript has no DOM types). */
interface PageDocument {
  querySelectorAll(selector: string): { length: number };
  querySelector(selector: string): unknown;
  documentElement: { scrollWidth: number };
  body: { textContent: string | null };
  activeElement: { id: string } | null;
}
const SHOTS = fileURLToPath(new URL('../../test-output/ui-screenshots/', import.meta.url));

type Json = Record<string, any>;

describe.skipIf(!CHROMIUM)('web UI in chromium', () => {
  let cluster: Cluster;
  let browser: Browser;
  let page: Page;
  let dc1 = '';
  const requested: string[] = [];
  /** Errors the pages logged or threw, and answers of 500 or more: none may happen anywhere. */
  const problems: string[] = [];
  let readSecret = '';
  let pem = '';
  let caPEM = '';

  const api = async (method: string, path: string, body?: unknown, base = dc1): Promise<Json> => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { 'X-Service-Token': cluster.managementToken, 'Content-Type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const json = (await res.json()) as Json;
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const shot = (name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    cluster = await startCluster({ datacenters: ['dc1', 'dc2'], configFor: { dc1: { replication_history_interval: '300ms' } } });
    await cluster.waitForReplication();
    dc1 = cluster.get('dc1').url;
    const reader = await api('PUT', '/v1/acl/policy', { Name: 'ui-acl-read', Rules: 'acl = "read"' });
    readSecret = (await api('PUT', '/v1/acl/token', { Description: 'auditor', Policies: [{ ID: reader.ID }] })).SecretID;
    await api('PUT', '/v1/acl/token', { Description: 'only in dc2', Local: true }, cluster.get('dc2').url);
    pem = await exportSPKI((await generateKeyPair('RS256', { extractable: true })).publicKey);
    caPEM = (await createCA({ domain: 'watchword', days: 1 })).cert;
    await cluster.waitForReplication();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    page = await context.newPage();
    page.on('request', (r) => requested.push(r.url()));
    page.on('dialog', (d) => void d.accept());
    page.on('pageerror', (e) => problems.push(`${page.url()}: ${e.message}`));
    page.on('console', (m) => {
      // A refused API call is logged by the browser itself ("Failed to load resource"); the tests provoke some.
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`${page.url()}: ${m.text()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 500 || (r.status() === 404 && new URL(r.url()).pathname.startsWith('/ui/')))
        problems.push(`${r.status()} ${r.url()}`);
    });
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await cluster?.stop();
  }, 60_000);

  const signIn = async (secret: string) => {
    await page.goto(`${dc1}/`);
    await page.waitForURL(/\/ui\/$/);
    // Each test signs in afresh, whatever the last one left in this tab.
    await page.waitForSelector('#secret, header.bar');
    if ((await page.locator('header.bar').count()) > 0) await page.click('button:has-text("Sign out")');
    await page.fill('#secret', secret);
    await page.click('button[type=submit]');
    await page.waitForSelector('header.bar');
  };
  const open = async (hash: string, ready: string) => {
    await page.goto(`${dc1}/ui/${hash}`);
    await page.waitForSelector(ready);
  };
  /** Types like a person, key by key, into a field (focus must stay for the whole text to arrive). */
  const type = async (selector: string, text: string) => {
    const field = page.locator(selector);
    await field.fill('');
    await field.pressSequentially(text, { delay: 5 });
    expect(await page.evaluate(() => (globalThis as unknown as { document: PageDocument }).document.activeElement?.id)).toBe(
      selector.replace(/^#/, ''),
    );
  };
  /** axe-core on the page as it is: no critical violation. */
  const axe = async (name: string) => {
    await page.evaluate(AXE);
    const result = (await page.evaluate(() => (globalThis as unknown as { axe: { run(): Promise<unknown> } }).axe.run())) as {
      violations: Array<{ id: string; impact: string; nodes: unknown[] }>;
    };
    const critical = result.violations.filter((v) => v.impact === 'critical').map((v) => `${v.id} (${v.nodes.length})`);
    expect(critical, `${name}: critical accessibility violations`).toEqual([]);
  };
  /** A record read back without what a write moves on its own (its index; its Hash when content changed). */
  const stable = (r: Json, ...drop: string[]) =>
    Object.fromEntries(Object.entries(r).filter(([k]) => !['ModifyIndex', ...drop].includes(k)));

  describe('every form keeps every field of what it edits', () => {
    let policy: Json;
    let role: Json;
    beforeAll(async () => {
      await signIn(cluster.managementToken);
      policy = await api('PUT', '/v1/acl/policy', {
        Name: 'rt-policy',
        Description: 'dc1 only',
        Rules: 'service "web" { policy = "read" }',
        Datacenters: ['dc1'],
      });
      role = await api('PUT', '/v1/acl/role', {
        Name: 'rt-role',
        Description: 'every field',
        Policies: [{ ID: policy.ID }],
        ServiceIdentities: [{ ServiceName: 'api', Datacenters: ['dc1'] }],
        NodeIdentities: [{ NodeName: 'n2', Datacenter: 'dc1' }],
        TemplatedPolicies: [
          { TemplateName: 'builtin/dns' },
          { TemplateName: 'builtin/service', TemplateVariables: { Name: 'api' }, Datacenters: ['dc1'] },
        ],
      });
    });

    /** Opens the edit page, saves unchanged, then edits the description: only it changes. */
    const roundTrip = async (what: string, read: () => Promise<Json>, hash: string, description: string) => {
      const before = await read();
      await open(hash, 'form button[type=submit]');
      await page.click('form button[type=submit]');
      // Whatever the form does (write or not), give it the time to; then the record must be as it was.
      await page.waitForSelector('[role=status]', { timeout: 3000 }).catch(() => undefined);
      const unchanged = await read();
      expect(unchanged, `${what} saved unchanged`).toEqual(before);
      expect(await page.textContent('[role=status]')).toContain('No changes');
      await shot(`${what}-edit`);
      await type(description, `${what} edited in the browser`);
      await page.click('form button[type=submit]');
      await page.waitForFunction(() => {
        const g = globalThis as unknown as { document: PageDocument; location: { hash: string } };
        return (g.document.body.textContent ?? '').includes('Saved') || !g.location.hash.endsWith('/edit');
      });
      // The page may show the record before the write lands (an edit page whose address does not end in /edit).
      let after = await read();
      for (let i = 0; i < 100 && after.Description !== `${what} edited in the browser`; i++) {
        await new Promise((r) => setTimeout(r, 50));
        after = await read();
      }
      expect(after.Description).toBe(`${what} edited in the browser`);
      expect(stable(after, 'Description', 'Hash')).toEqual(stable(before, 'Description', 'Hash'));
    };

    it('a token with every field set', async () => {
      const token = await api('PUT', '/v1/acl/token', {
        Description: 'every field',
        Policies: [{ ID: policy.ID }],
        Roles: [{ ID: role.ID }],
        ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }, { ServiceName: 'db' }],
        NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }],
        TemplatedPolicies: [
          { TemplateName: 'builtin/dns' },
          { TemplateName: 'builtin/service', TemplateVariables: { Name: 'api' }, Datacenters: ['dc1'] },
        ],
        ExpirationTTL: '2h',
      });
      await roundTrip('token', () => api('GET', `/v1/acl/token/${token.AccessorID}`), `#/tokens/${token.AccessorID}/edit`, '#t-desc');
    }, 60_000);

    it('a role with every field set', async () => {
      await roundTrip('role', () => api('GET', `/v1/acl/role/${role.ID}`), `#/roles/${role.ID}`, '#r-desc');
    }, 60_000);

    it('a policy valid in one datacenter', async () => {
      await roundTrip('policy', () => api('GET', `/v1/acl/policy/${policy.ID}`), `#/policies/${policy.ID}`, '#p-desc');
    }, 60_000);

    it('an auth method with every field and Config key set', async () => {
      await api('PUT', '/v1/acl/auth-method', {
        Name: 'rt-jwt',
        Type: 'jwt',
        DisplayName: 'Round trip',
        Description: 'every field',
        MaxTokenTTL: '45m',
        TokenLocality: 'global',
        Config: {
          JWTValidationPubKeys: [pem],
          BoundIssuer: 'https://issuer.example',
          BoundAudiences: ['a', 'b'],
          ClaimMappings: { svc: 'service' },
          ListClaimMappings: { groups: 'groups' },
          JWTSupportedAlgs: ['RS256'],
          ClockSkewLeeway: '30s',
        },
      });
      await roundTrip('auth-method', () => api('GET', '/v1/acl/auth-method/rt-jwt'), '#/auth-methods/rt-jwt', '#am-desc');
    }, 60_000);

    it('a binding rule with every field set', async () => {
      const rule = await api('PUT', '/v1/acl/binding-rule', {
        AuthMethod: 'rt-jwt',
        Description: 'every field',
        Selector: 'value.service == "web"',
        BindType: 'templated-policy',
        BindName: 'builtin/service',
        BindVars: { name: '${value.service}' },
      });
      await roundTrip('binding-rule', () => api('GET', `/v1/acl/binding-rule/${rule.ID}`), `#/binding-rules/${rule.ID}`, '#br-desc');
    }, 60_000);

    it('a quota with every field set', async () => {
      const quota = await api('PUT', '/v1/acl/quota', {
        Name: 'rt-quota',
        Description: 'every field',
        AuthMethod: 'rt-jwt',
        MaxTokens: 50,
        MaxTokenTTL: '2h',
        MinTokenTTL: '5m',
      });
      await roundTrip('quota', () => api('GET', `/v1/acl/quota/${quota.ID}`), `#/quotas/${quota.ID}`, '#q-desc');
    }, 60_000);
  });

  describe('what is typed and chosen reaches the API whole', () => {
    beforeAll(() => signIn(cluster.managementToken));

    it('a kubernetes auth method, typed key by key, every select chosen', async () => {
      await open('#/auth-methods/new', '#am-name');
      await type('#am-name', 'k8s-typed');
      await page.selectOption('#am-type', 'kubernetes');
      await type('#am-display', 'Kubernetes cluster');
      await type('#am-desc', 'typed in the browser');
      await type('#am-ttl', '30m');
      await page.selectOption('#am-locality', 'global');
      await type('#am-config-Host', 'https://kubernetes.example:6443');
      // A certificate is pasted, not typed.
      await page.fill('#am-config-CACert', caPEM);
      await type('#am-config-ServiceAccountJWT', 'eyJhbGciOiJSUzI1NiJ9.reviewer.jwt');
      await shot('auth-method-form');
      await axe('auth-method form');
      await page.click('form button[type=submit]');
      await page.waitForSelector('h1:has-text("Auth method “k8s-typed”")');
      expect(await api('GET', '/v1/acl/auth-method/k8s-typed')).toMatchObject({
        Name: 'k8s-typed',
        Type: 'kubernetes',
        DisplayName: 'Kubernetes cluster',
        Description: 'typed in the browser',
        MaxTokenTTL: '30m0s',
        TokenLocality: 'global',
        Config: { Host: 'https://kubernetes.example:6443', CACert: caPEM, ServiceAccountJWT: 'eyJhbGciOiJSUzI1NiJ9.reviewer.jwt' },
      });
    }, 60_000);

    it('a binding rule, every bind type offered and the chosen one sent', async () => {
      const role = await api('PUT', '/v1/acl/role', { Name: 'deployers' });
      void role;
      await open('#/binding-rules/new?method=k8s-typed', '#br-selector');
      expect(await page.locator('#br-type option').evaluateAll((os) => os.map((o) => (o as unknown as { value: string }).value))).toEqual([
        'service',
        'node',
        'role',
        'policy',
        'templated-policy',
      ]);
      await type('#br-desc', 'deployers get the role');
      await type('#br-selector', 'serviceaccount.name == "deployer"');
      await page.selectOption('#br-type', 'role');
      await type('#br-name', 'deployers');
      await page.click('form button[type=submit]');
      await page.waitForSelector('h1:has-text("Binding rule of k8s-typed")');
      const id = page.url().split('/').pop() as string;
      expect(await api('GET', `/v1/acl/binding-rule/${id}`)).toMatchObject({
        AuthMethod: 'k8s-typed',
        Description: 'deployers get the role',
        Selector: 'serviceaccount.name == "deployer"',
        BindType: 'role',
        BindName: 'deployers',
      });
    }, 60_000);

    it('a quota, typed key by key, its scope chosen, and its use shown against its limit', async () => {
      await open('#/quotas/new', '#q-name');
      await type('#q-name', 'ui-team');
      await type('#q-desc', 'typed in the browser');
      await page.selectOption('#q-scope', 'Namespace');
      await type('#q-scope-name', 'ui-team');
      await type('#q-max', '3');
      await type('#q-max-ttl', '12h');
      await page.click('form button[type=submit]');
      await page.waitForSelector('h1:has-text("Quota “ui-team”")');
      const id = page.url().split('/').pop() as string;
      expect(await api('GET', `/v1/acl/quota/${id}`)).toMatchObject({
        Name: 'ui-team',
        Description: 'typed in the browser',
        Namespace: 'ui-team',
        MaxTokens: 3,
        MaxTokenTTL: '12h0m0s',
        Local: false,
        Used: 0,
      });
      expect(await api('GET', `/v1/acl/quota/${id}`)).not.toHaveProperty('AuthMethod');
      await api('PUT', '/v1/acl/token?ns=ui-team', {});
      await api('PUT', '/v1/acl/token?ns=ui-team', {});
      await open('#/quotas', '[data-testid=quota-table]');
      const row = page.locator('[data-testid=quota-table] tr', { hasText: 'ui-team' });
      expect(await row.textContent()).toContain('2 / 3');
      expect(await row.textContent()).toContain('namespace ui-team');
      await shot('quotas');
    }, 60_000);

    it('a token with identities, datacenters and a templated policy, typed key by key', async () => {
      await open('#/tokens/new', '#t-desc');
      await type('#t-desc', 'typed token');
      await page.click('[data-testid=t-si-add]');
      await type('#t-si-0-name', 'billing');
      await type('#t-si-0-dcs', 'dc1, dc2');
      await page.click('[data-testid=t-ni-add]');
      await type('#t-ni-0-name', 'node-7');
      await type('#t-ni-0-dc', 'dc2');
      await page.click('[data-testid=t-tp-add]');
      await page.selectOption('#t-tp-0-template', 'builtin/service');
      await type('#t-tp-0-var', 'payments');
      await type('#t-tp-0-dcs', 'dc1');
      await type('#t-ttl', '90m');
      await page.click('form button[type=submit]');
      await page.waitForSelector('h1:has-text("typed token")');
      const t = await api('GET', `/v1/acl/token/${page.url().split('/').pop()}`);
      expect(t).toMatchObject({
        Description: 'typed token',
        ServiceIdentities: [{ ServiceName: 'billing', Datacenters: ['dc1', 'dc2'] }],
        NodeIdentities: [{ NodeName: 'node-7', Datacenter: 'dc2' }],
        TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { name: 'payments' }, Datacenters: ['dc1'] }],
        Local: false,
      });
      expect(Date.parse(t.ExpirationTime) - Date.parse(t.CreateTime)).toBe(90 * 60_000);
    }, 60_000);

    it('a role and a policy, typed key by key', async () => {
      await open('#/policies/new', '#p-name');
      await type('#p-name', 'typed-policy');
      await type('#p-desc', 'typed description');
      await type('#p-rules', 'key_prefix "app/" { policy = "list" }');
      await type('#p-dcs', 'dc2');
      await page.click('form button[type=submit]');
      await page.waitForSelector('h1:has-text("Policy “typed-policy”")');
      const p = await api('GET', '/v1/acl/policy/name/typed-policy');
      expect(p).toMatchObject({ Description: 'typed description', Rules: 'key_prefix "app/" { policy = "list" }', Datacenters: ['dc2'] });
      await open('#/roles/new', '#r-name');
      await type('#r-name', 'typed-role');
      await type('#r-desc', 'typed role');
      await page.check('[aria-label=Policies] label:has-text("typed-policy") input');
      await page.click('[data-testid=r-ni-add]');
      await type('#r-ni-0-name', 'n9');
      await type('#r-ni-0-dc', 'dc1');
      await page.click('form button[type=submit]');
      await page.waitForSelector('h1:has-text("Role “typed-role”")');
      expect(await api('GET', '/v1/acl/role/name/typed-role')).toMatchObject({
        Description: 'typed role',
        Policies: [{ ID: p.ID, Name: 'typed-policy' }],
        NodeIdentities: [{ NodeName: 'n9', Datacenter: 'dc1' }],
      });
    }, 60_000);
  });

  it('takes an operator through policies, roles and tokens', async () => {
    await signIn(cluster.managementToken);
    // A policy with a syntax error: the error names the line; fixed, it saves.
    await page.click('text=Policies');
    await page.click('text=Create policy');
    await page.fill('#p-name', 'ui-web');
    await page.fill('#p-rules', 'service "web" {\n  policy = \n}');
    await page.click('button:has-text("Create")');
    const error = page.locator('[data-testid=policy-error]');
    await error.waitFor();
    expect(await error.textContent()).toMatch(/Line 3, column \d+/);
    await shot('policy-editor-error');
    await page.fill('#p-rules', 'service "web" {\n  policy = "read"\n}');
    await page.click('button:has-text("Create")');
    await page.waitForSelector('h1:has-text("Policy “ui-web”")');
    await page.waitForSelector('[data-testid=used-by-tokens]');
    await shot('policy-editor');
    await axe('policy editor');

    // A role with it.
    await page.click('header >> text=Roles');
    await page.click('text=Create role');
    await page.fill('#r-name', 'ui-role');
    await page.check('label:has-text("ui-web") input');
    await page.click('button:has-text("Create")');
    await page.waitForSelector('h1:has-text("Role “ui-role”")');

    // A token with the role, the policy and a service identity.
    await page.click('header >> text=Tokens');
    await page.click('text=Create token');
    await page.fill('#t-desc', 'ui token');
    await page.check('[aria-label=Roles] label:has-text("ui-role") input');
    await page.check('[aria-label=Policies] label:has-text("ui-web") input');
    await page.click('[data-testid=t-si-add]');
    await page.fill('#t-si-0-name', 'billing');
    await page.click('button:has-text("Create")');
    await page.waitForSelector('h1:has-text("ui token")');
    const accessor = page.url().split('/').pop() as string;

    // Found with the policy filter; the signed-in token is marked in the list.
    await page.click('header >> text=Tokens');
    await page.waitForSelector('[data-testid=you]');
    await page.selectOption('#filter-kind', 'policy');
    await page.selectOption('#filter-value', { label: 'ui-web' });
    await page.waitForFunction(
      () =>
        (globalThis as unknown as { document: PageDocument }).document.querySelectorAll('[data-testid=token-table] tbody tr').length === 1,
    );
    expect(await page.textContent('[data-testid=token-table] tbody')).toContain('ui token');
    await page.selectOption('#filter-value', '');
    await page.waitForSelector('[data-testid=you]');
    // Last use (docs/http-api.md, "Last use"): the signed-in token's row shows it; none of these new tokens has gone unused for a day.
    expect(await page.locator('[data-testid=token-table] tr.self td:last-child time').count()).toBe(1);
    await page.selectOption('#filter-unused', '24h');
    await page.waitForSelector('text=0 of 0 tokens');
    await page.selectOption('#filter-unused', '');
    await page.waitForSelector('[data-testid=you]');
    await shot('token-list');
    await axe('token list');

    // The policy page lists the token and the role that use it.
    await page.goto(`${dc1}/ui/#/policies/${(await api('GET', '/v1/acl/policy/name/ui-web')).ID}`);
    await page.waitForSelector('[data-testid=used-by-tokens] a');
    expect(await page.textContent('[data-testid=used-by-tokens]')).toContain('ui token');
    expect(await page.textContent('[data-testid=used-by-roles]')).toContain('ui-role');

    // Its effective policies: the linked one, the role's, and the service identity's. The secret is masked until shown.
    await page.goto(`${dc1}/ui/#/tokens/${accessor}`);
    const effective = page.locator('[data-testid=effective-policies]');
    await page.waitForSelector('[data-testid=effective-policies] h3');
    const names = await page.locator('[data-testid=effective-policies] h3').allTextContents();
    expect(names).toContain('ui-web');
    expect(
      names.some((n) => n.startsWith('synthetic-policy-')),
      names.join(', '),
    ).toBe(true);
    expect(await effective.textContent()).toContain('service "billing"');
    expect(await page.textContent('[data-testid=secret]')).not.toMatch(/[0-9a-f]{8}-/);
    await shot('token-detail');
    await axe('token detail');
    await page.click('[data-testid=copy-secret]');
    await page.waitForSelector('button:has-text("Copied")');
    await page.click('[data-testid=reveal-secret]');
    expect(await page.textContent('[data-testid=secret]')).toMatch(/^[0-9a-f-]{36}$/);
    await page.click('[data-testid=reveal-secret]');

    // Test a permission with the token's own secret: its service identity may write billing, not payments.
    await page.selectOption('#perm-resource', 'service');
    await page.fill('#perm-segment', 'billing');
    await page.selectOption('#perm-access', 'write');
    await page.click('[data-testid=permission-test] button:has-text("Check")');
    expect(await (await page.waitForSelector('[data-testid=permission-answer]')).textContent()).toMatch(/^allow/);
    // With its reason: the service identity's exact rule, over the prefix rule it beat.
    expect(await page.textContent('[data-testid=reason]')).toMatch(
      /decided by service identity “billing”:\s*service "billing" \{ policy = "write" \}\s*over service identity “billing”:\s*service_prefix "" \{ policy = "read" \}/,
    );
    await shot('permission-explain');
    await page.fill('#perm-segment', 'payments');
    await page.click('[data-testid=permission-test] button:has-text("Check")');
    expect(await (await page.waitForSelector('[data-testid=permission-answer]')).textContent()).toMatch(/^deny/);
    expect(await page.textContent('[data-testid=reason]')).toMatch(
      /decided by service identity “billing”:\s*service_prefix "" \{ policy = "read" \}/,
    );

    // Rotate its secret, the old one kept for an hour: the page shows until when, and the new secret.
    const before = (await api('GET', `/v1/acl/token/${accessor}`)).SecretID;
    await page.selectOption('#rotate-overlap', '1h');
    await page.click('button:has-text("Rotate secret")');
    expect(await (await page.waitForSelector('[data-testid=old-secret]')).textContent()).toMatch(
      /rotated; the old one stops working in 60 minutes/,
    );
    const after = await api('GET', `/v1/acl/token/${accessor}`);
    expect(after.SecretID).not.toBe(before);
    expect(Date.parse(after.PreviousSecretExpirationTime as string) - Date.now()).toBeGreaterThan(50 * 60_000);
    await page.click('[data-testid=reveal-secret]');
    expect(await page.textContent('[data-testid=secret]')).toBe(after.SecretID);
    await page.click('[data-testid=reveal-secret]');
    await shot('token-rotated');

    // Clone, then delete the clone (confirmed).
    await page.click('button:has-text("Clone")');
    await page.waitForSelector('h1:has-text("Clone of ui token")');
    const clone = page.url().split('/').pop() as string;
    expect(clone).not.toBe(accessor);
    await page.click('button:has-text("Delete")');
    await page.waitForURL(/#\/tokens$/);
    expect((await fetch(`${dc1}/v1/acl/token/${clone}`, { headers: { 'X-Service-Token': cluster.managementToken } })).status).toBe(404);
    expect((await fetch(`${dc1}/v1/acl/token/${accessor}`, { headers: { 'X-Service-Token': cluster.managementToken } })).status).toBe(200);

    // A built-in policy says what may not change, and offers no rules editing.
    await page.goto(`${dc1}/ui/#/policies/00000000-0000-0000-0000-000000000001`);
    await page.waitForSelector('[data-testid=builtin-note]');
    expect(await page.locator('#p-rules').getAttribute('readonly')).not.toBeNull();

    // Narrow screens: still one column of readable content.
    await page.goto(`${dc1}/ui/#/tokens`);
    await page.waitForSelector('[data-testid=token-table] tbody tr');
    await page.setViewportSize({ width: 390, height: 844 });
    await shot('token-list-390');
    expect(
      await page.evaluate(() => (globalThis as unknown as { document: PageDocument }).document.documentElement.scrollWidth),
    ).toBeLessThanOrEqual(390 + 1);
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.click('button:has-text("Sign out")');
  }, 120_000);

  it('answers who can, with the rule, and shows what a policy edit would break before saving it', async () => {
    const policy = await api('PUT', '/v1/acl/policy', { Name: 'ui-sessions', Rules: 'session "s1" { policy = "write" }' });
    const token = await api('PUT', '/v1/acl/token', { Description: 'ui session holder', Policies: [{ ID: policy.ID }] });
    // The token is asked about once: a check the dry run judges again.
    const asked = await fetch(`${dc1}/v1/internal/acl/authorize`, {
      method: 'POST',
      headers: { 'X-Service-Token': token.SecretID as string, 'Content-Type': 'application/json' },
      body: JSON.stringify([{ Resource: 'session', Segment: 's1', Access: 'write' }]),
    });
    expect(asked.status).toBe(200);

    await signIn(cluster.managementToken);
    await open('#/who-can', '#who-resource');
    await page.selectOption('#who-resource', 'session');
    await page.fill('#who-segment', 's1');
    await page.selectOption('#who-access', 'write');
    await page.click('[data-testid=who-can-form] button:has-text("Ask")');
    const row = await page.waitForSelector(`[data-testid=who-can-tokens] tr:has-text("${token.AccessorID}")`, { timeout: 5_000 });
    expect(await row.textContent()).toMatch(/decided by policy “ui-sessions”:\s*session "s1" \{ policy = "write" \}/);
    expect(await page.textContent('[data-testid=who-can-tokens]')).toContain('global-management');
    await shot('who-can');
    await axe('who can');

    await open(`#/policies/${policy.ID}`, '#p-rules');
    await page.fill('#p-rules', 'session "s2" { policy = "write" }');
    await page.click('[data-testid=policy-form] button:has-text("Save")');
    const flips = await page.waitForSelector('[data-testid=dry-run-flips]', { timeout: 5_000 });
    expect(await flips.textContent()).toMatch(/session “s1” write\s*allow → deny\s*1/);
    expect(await page.textContent('[data-testid=dry-run]')).toContain('It reaches 1 token');
    await shot('policy-dry-run');
    await axe('policy dry run');
    // Not saved until the operator says so.
    expect((await api('GET', `/v1/acl/policy/${policy.ID}`)).Rules).toBe('session "s1" { policy = "write" }');
    await page.click('[data-testid=save-anyway]');
    await page.waitForSelector('text=Saved policy “ui-sessions”.');
    expect((await api('GET', `/v1/acl/policy/${policy.ID}`)).Rules).toBe('session "s2" { policy = "write" }');
    await page.click('button:has-text("Sign out")');
  }, 30_000);

  it('shows a read-only token <hidden> secrets and no edit buttons', async () => {
    await signIn(readSecret);
    expect(await page.textContent('[data-testid=whoami]')).toContain('read-only');
    // Pages it cannot read (operator:read) are not offered; what it can read is.
    const nav = (await page.textContent('header nav')) ?? '';
    expect(nav).toContain('Tokens');
    expect(nav).not.toContain('Servers');
    expect(nav).not.toContain('Audit');
    await page.waitForSelector('[data-testid=token-table] tbody tr');
    expect(await page.locator('text=Create token').count()).toBe(0);
    await page.click('[data-testid=token-table] a >> nth=0');
    await page.waitForSelector('[data-testid=secret]');
    expect(await page.textContent('[data-testid=secret]')).toBe('<hidden>');
    expect(await page.locator('[data-testid=copy-secret]').count()).toBe(0);
    for (const label of ['Edit', 'Clone', 'Delete'])
      expect(await page.locator(`main button:has-text("${label}"), main a:has-text("${label}")`).count()).toBe(0);
    await page.click('header >> text=Policies');
    await page.click('td >> text=ui-web');
    await page.waitForSelector('#p-rules');
    expect(await page.locator('main button').count()).toBe(0);
    await page.click('button:has-text("Sign out")');
  }, 60_000);

  it('lists both datacenters with replication status, a lag chart, and switches to dc2', async () => {
    await signIn(cluster.managementToken);
    await page.click('header >> text=Datacenters');
    await page.waitForSelector('tr[data-dc=dc2]');
    expect(await page.textContent('tr[data-dc=dc1]')).toContain('Primary');
    expect(await page.textContent('tr[data-dc=dc2]')).toContain('Connected');
    expect(await page.textContent('tr[data-dc=dc2] [data-testid=lag]')).toMatch(/^\d+$/);
    // Which primary each follows, and its epoch (GET /v1/operator/primary through ?dc=).
    expect(await page.textContent('tr[data-dc=dc1] [data-testid=follows]')).toBe('dc1, epoch 1');
    expect(await page.textContent('tr[data-dc=dc2] [data-testid=follows]')).toBe('dc1, epoch 1');
    // The primary has sampled dc2's lag (every 300 ms here): one line in the chart.
    await page.waitForSelector('[data-testid=lag-chart] polyline[data-dc=dc2]', { state: 'attached' });
    expect(
      Number(await page.locator('polyline[data-dc=dc2]').evaluate((p) => (p as unknown as { points: { length: number } }).points.length)),
    ).toBeGreaterThan(1);
    // The primary role's two moves, each behind a confirmation that says what it does. Here both are refused (dc2
    // still hears dc1; dc1 has no replication token to follow dc2 with), and the page says why; nothing moves.
    const dialogs: string[] = [];
    page.on('dialog', (d) => void dialogs.push(d.message()));
    await page.click('[data-testid=promote-dc2]');
    await page.waitForSelector('[data-testid=primary-role] [role=alert]');
    expect(dialogs.at(-1)).toContain('Promote dc2 to primary? Only when the primary dc1 is lost');
    expect(await page.textContent('[data-testid=primary-role] [role=alert]')).toContain('still hears the primary dc1');
    await page.click('[data-testid=transfer]');
    await page.waitForFunction(() =>
      ((globalThis as unknown as { document: PageDocument }).document.body.textContent ?? '').includes('needs a replication token'),
    );
    expect(dialogs.at(-1)).toContain('Hand the primary role from dc1 to dc2?');
    expect(await page.textContent('tr[data-dc=dc2] [data-testid=follows]')).toBe('dc1, epoch 1');
    // The releases: every server on this one, not yet finalized (two sentences, not run together).
    await page.waitForSelector('text=Every server runs this release.');
    expect(await page.textContent('main')).toContain('Finalized: not yet. Every server runs this release.');
    await shot('datacenters');
    await axe('datacenters');
    await page.selectOption('#dc-switch', 'dc2');
    await page.click('header >> text=Tokens');
    await page.waitForSelector('td:has-text("only in dc2")');
    // The Local/global filter: the dc2 token is Local.
    await page.selectOption('#filter-scope', 'global');
    await page.waitForSelector('td:has-text("only in dc2")', { state: 'detached' });
    await page.selectOption('#filter-scope', 'local');
    await page.waitForSelector('td:has-text("only in dc2")');
    expect(await page.locator('[data-testid=token-table] tbody tr').count()).toBe(1);
    await page.selectOption('#dc-switch', 'dc1');
    await page.waitForFunction(
      () => !((globalThis as unknown as { document: PageDocument }).document.body.textContent ?? '').includes('only in dc2'),
    );
  }, 60_000);

  it('shows the servers of the datacenter: leader, term, each server', async () => {
    await signIn(cluster.managementToken);
    await page.click('header >> text=Servers');
    await page.waitForSelector('[data-testid=servers] tbody tr');
    expect(await page.textContent('[data-testid=servers-summary]')).toContain(new URL(dc1).host);
    expect(await page.textContent('[data-testid=servers] tbody')).toContain('leader');
    await shot('servers');
    await axe('servers');
  }, 60_000);

  it('shows the audit log: filters by type, caller and object, pages to older events, links both ways', async () => {
    const self = await api('GET', '/v1/acl/token/self');
    const made = await Promise.all(
      Array.from({ length: 51 }, (_, i) => api('PUT', '/v1/acl/token', { Description: `audited ${i}`, Local: true })),
    );
    const last = made[made.length - 1] as Json;
    // A refusal by the read-only token: it may not write policies.
    const refused = await fetch(`${dc1}/v1/acl/policy`, {
      method: 'PUT',
      headers: { 'X-Service-Token': readSecret },
      body: JSON.stringify({ Name: 'nope' }),
    });
    expect(refused.status).toBe(403);
    const reader = (await (await fetch(`${dc1}/v1/acl/token/self`, { headers: { 'X-Service-Token': readSecret } })).json()) as Json;

    await signIn(cluster.managementToken);
    await page.click('header >> text=Audit');
    await page.waitForSelector('[data-testid=audit-table] tbody tr');
    await page.selectOption('#audit-type', 'refused');
    await page.click('[data-testid=audit-filters] button[type=submit]');
    await page.waitForURL(/#\/audit\?type=refused$/);
    await page.waitForSelector(`[data-testid=audit-table] tbody tr:has-text("${reader.AccessorID}")`);
    expect(await page.locator('[data-testid=audit-table] tbody tr:not([data-type=refused])').count()).toBe(0);
    expect(await page.textContent(`[data-testid=audit-table] tbody tr:has-text("${reader.AccessorID}")`)).toContain('acl:write');
    await shot('audit');
    await axe('audit');

    // What the management token created: 50 on the first page, the rest behind "Older events".
    await page.selectOption('#audit-type', 'token-create');
    await type('#audit-accessor', self.AccessorID);
    await page.click('[data-testid=audit-filters] button[type=submit]');
    await page.waitForURL(/accessor=/);
    await page.waitForSelector(`[data-testid=audit-table] a:has-text("token ${last.AccessorID}")`);
    expect(await page.locator('[data-testid=audit-table] tbody tr').count()).toBe(50);
    expect(await page.locator('[data-testid=audit-table] tbody tr:not([data-type=token-create])').count()).toBe(0);
    await page.click('[data-testid=audit-older]');
    await page.waitForFunction(
      () =>
        (globalThis as unknown as { document: PageDocument }).document.querySelectorAll('[data-testid=audit-table] tbody tr').length > 50,
    );

    // From the event to the token, and from the token to what was done to it.
    await page.click(`[data-testid=audit-table] a:has-text("token ${last.AccessorID}")`);
    await page.waitForSelector('[data-testid=audit-of]');
    await page.click('[data-testid=audit-of]');
    await page.waitForURL(/kind=token&id=/);
    await page.waitForSelector('[data-testid=audit-table] tbody tr[data-type=token-create]');
    expect(await page.locator('[data-testid=audit-table] tbody tr').count()).toBe(1);
    expect(await page.inputValue('#audit-id')).toBe(last.AccessorID);
    await page.click('[data-testid=audit-filters] button:has-text("Clear")');
    await page.waitForURL(/#\/audit$/);
    expect(await page.inputValue('#audit-id')).toBe('');

    // An enforcing client's report of its denials: who reported, and what it denied.
    const watched = await api('PUT', '/v1/acl/token', { Description: 'reported', Policies: [{ Name: 'ui-acl-read' }] });
    const authz = new Authorizer({ addresses: [dc1], token: cluster.managementToken, name: 'ui-billing' });
    try {
      expect(await authz.allowed(watched.SecretID, 'acl', '', 'read')).toBe(true);
      for (let i = 0; i < 3; i++) expect(authz.allowed(watched.SecretID, 'service', 'db', 'write')).toBe(false);
      // Reports go at most once a second: the page is opened again until the line is there.
      const reported = '[data-testid=audit-table] tbody tr:has-text("ui-billing")';
      await open('#/audit?type=denied-by-client', '[data-testid=audit-filters]');
      for (let i = 0; i < 20 && (await page.locator(reported).count()) === 0; i++) {
        await new Promise((r) => setTimeout(r, 500));
        await page.reload();
        await page.waitForSelector('[data-testid=audit-filters]');
      }
      const row = (await page.textContent('[data-testid=audit-table] tbody tr:has-text("ui-billing")')) ?? '';
      expect(row).toContain('ui-billing denied 3');
      expect(row).toContain(`3× service "db":write by token ${watched.AccessorID}`);
    } finally {
      authz.close();
    }

    // Without operator:read the page says which permission is missing.
    await signIn(readSecret);
    await open('#/audit', '[role=alert]');
    expect(await page.textContent('[role=alert]')).toContain('operator:read');
    await page.click('button:has-text("Sign out")');
  }, 90_000);

  it('never puts a secret in a URL, and its pages allow no other origin', async () => {
    expect(requested.length).toBeGreaterThan(20);
    for (const url of requested) {
      expect(url).not.toContain(cluster.managementToken);
      expect(url).not.toContain(readSecret);
      expect(new URL(url).origin).toBe(new URL(dc1).origin);
    }
    for (const path of ['/ui/', '/ui/app.js', '/ui/api/']) {
      const csp = (await fetch(`${dc1}${path}`)).headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'self'");
      expect(csp).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+'(;|$)/);
      expect(csp).not.toMatch(/https?:|\*|data:.*script|unsafe-eval/);
    }
    // One Preact: the declared package, through the page's import map.
    expect(requested.some((u) => u.endsWith('/ui/vendor/preact/preact.module.js'))).toBe(true);
    expect(requested.some((u) => u.includes('standalone'))).toBe(false);
  });

  it('serves the API reference from the OpenAPI document, its badges readable', async () => {
    for (const path of ['/ui/api', '/docs']) {
      const res = await fetch(`${dc1}${path}`, { redirect: 'manual' });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('/ui/api/');
    }
    await page.goto(`${dc1}/ui/api/`);
    await page.waitForSelector('.opblock', { timeout: 20_000 });
    expect(await page.textContent('body')).toContain('/v1/acl/token');
    expect(await page.locator('.opblock').count()).toBeGreaterThan(30);
    // The version badges: text in a colour other than their background.
    const badge = page.locator('pre.version').first();
    const [fg, bg] = await badge.evaluate((e) => {
      const s = (globalThis as unknown as { getComputedStyle(e: unknown): { color: string; backgroundColor: string } }).getComputedStyle(e);
      return [s.color, s.backgroundColor];
    });
    expect(fg).not.toBe(bg);
    expect((await badge.textContent())?.trim()).not.toBe('');
    await shot('api-reference');
  }, 60_000);

  it('draws the inventory: the figures and a chart per kind, as the API counts them', async () => {
    await signIn(cluster.managementToken);
    const counts = await api('GET', '/v1/acl/inventory');
    await open('#/inventory', '[data-testid=inv-tokens]');
    expect(await page.textContent('[data-testid=inv-tokens] .value')).toBe(String(counts.Tokens));
    expect(await page.textContent('[data-testid=inv-acl-write] .value')).toBe(String(counts.ACLWriteHolders));
    const methodRows = await page.locator('[data-testid=inv-by-method] tr').count();
    expect(methodRows).toBe(Math.min(16, Object.keys(counts.ByAuthMethod).length));
    expect(await page.textContent('[data-testid=inv-by-namespace]')).toContain(String(counts.ByNamespace.default));
    expect(await page.textContent('[data-testid=inv-quotas]')).toContain('ui-team (of 3)');
    await shot('inventory');
  }, 60_000);

  it('pages through a token list longer than a page, and back', async () => {
    // More tokens than the list's page of 100; removed again at the end (other tests expect the signed-in token on the first page).
    const made: string[] = [];
    for (let i = 0; i < 110; i++) made.push((await api('PUT', '/v1/acl/token', { Description: `paged ${i}` })).AccessorID as string);
    try {
      await signIn(cluster.managementToken);
      await page.click('header >> text=Tokens');
      await page.waitForSelector('text=on page 1');
      expect(await page.locator('[data-testid=token-table] tbody tr').count()).toBe(100);
      const first = await page.textContent('[data-testid=token-table] tbody tr >> nth=0');
      // Forward to the last page (however many tokens the earlier tests left), each page new rows.
      const next = page.locator('[data-testid=token-pages] button:has-text("Next page")');
      let pages = 1;
      let rows = 100;
      while (!(await next.isDisabled())) {
        await next.click();
        pages++;
        await page.waitForSelector(`text=on page ${pages}`);
        expect(await page.textContent('[data-testid=token-table] tbody tr >> nth=0')).not.toBe(first);
        rows += await page.locator('[data-testid=token-table] tbody tr').count();
        expect(pages).toBeLessThan(20);
      }
      expect(pages).toBeGreaterThan(1);
      expect(rows).toBeGreaterThanOrEqual(110);
      // And back to the first.
      for (; pages > 1; pages--) {
        await page.click('[data-testid=token-pages] button:has-text("Previous page")');
        await page.waitForSelector(`text=on page ${pages - 1}`);
      }
      expect(await page.textContent('[data-testid=token-table] tbody tr >> nth=0')).toBe(first);
      await shot('token-list-paged');
    } finally {
      for (const id of made) await api('DELETE', `/v1/acl/token/${id}`);
    }
  }, 90_000);

  it('no page logged an error or got a 5xx', () => {
    expect(problems.join('\n')).toBe('');
  });
});
