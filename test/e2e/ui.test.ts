import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type Page, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, startCluster } from '../../src/testing/index.js';

// The web UI in a real browser (Debian's chromium, driven by playwright-core): the
// operator's round trip through policies, roles and tokens, a read-only sign-in, the
// datacenters page and switch, and what the pages may load and send.

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser', process.env.WATCHWORD_CHROMIUM ?? ''].find((p) => p && existsSync(p));
/** The page's document, inside page.evaluate (this project's TypeScript has no DOM types; the callbacks run in the page, so they name it themselves). */
interface PageDocument {
  querySelectorAll(selector: string): { length: number };
  documentElement: { scrollWidth: number };
  body: { textContent: string | null };
}
const SHOTS = fileURLToPath(new URL('../../test-output/ui-screenshots/', import.meta.url));

describe.skipIf(!CHROMIUM)('web UI in chromium', () => {
  let cluster: Cluster;
  let browser: Browser;
  let page: Page;
  const requested: string[] = [];
  let readSecret = '';

  const api = async (base: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, { method, headers: { 'X-Service-Token': cluster.managementToken, 'Content-Type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
    return (await res.json()) as Record<string, any>;
  };

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    cluster = await startCluster({ datacenters: ['dc1', 'dc2'] });
    await cluster.waitForReplication();
    const dc1 = cluster.get('dc1').url;
    const reader = await api(dc1, 'PUT', '/v1/acl/policy', { Name: 'ui-acl-read', Rules: 'acl = "read"' });
    readSecret = (await api(dc1, 'PUT', '/v1/acl/token', { Description: 'auditor', Policies: [{ ID: reader.ID }] })).SecretID;
    await api(cluster.get('dc2').url, 'PUT', '/v1/acl/token', { Description: 'only in dc2', Local: true });
    await cluster.waitForReplication();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    page = await context.newPage();
    page.on('request', (r) => requested.push(r.url()));
    page.on('dialog', (d) => void d.accept());
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await cluster?.stop();
  }, 60_000);

  const signIn = async (secret: string) => {
    await page.goto(`${cluster.get('dc1').url}/`);
    await page.waitForURL(/\/ui\/$/);
    // Each test signs in afresh, whatever the last one left in this tab.
    await page.evaluate(() => (globalThis as unknown as { sessionStorage: { clear(): void } }).sessionStorage.clear());
    await page.reload();
    await page.fill('#secret', secret);
    await page.click('button[type=submit]');
    await page.waitForSelector('header.bar');
  };

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
    await page.screenshot({ path: join(SHOTS, 'policy-editor-error.png'), fullPage: true });
    await page.fill('#p-rules', 'service "web" {\n  policy = "read"\n}');
    await page.click('button:has-text("Create")');
    await page.waitForSelector('h1:has-text("Policy “ui-web”")');

    // A role with it.
    await page.click('header >> text=Roles');
    await page.click('text=Create role');
    await page.fill('#r-name', 'ui-role');
    await page.check('label:has-text("ui-web") input');
    await page.click('button:has-text("Create")');
    await page.waitForSelector('td >> text=ui-role');

    // A token with the role, the policy and a service identity.
    await page.click('header >> text=Tokens');
    await page.click('text=Create token');
    await page.fill('#t-desc', 'ui token');
    await page.check('[aria-label=Roles] label:has-text("ui-role") input');
    await page.check('[aria-label=Policies] label:has-text("ui-web") input');
    await page.fill('#t-services', 'billing');
    await page.click('button:has-text("Create")');
    await page.waitForSelector('h1:has-text("ui token")');
    const accessor = page.url().split('/').pop() as string;

    // Found with the policy filter.
    await page.click('header >> text=Tokens');
    await page.selectOption('#filter-kind', 'policy');
    await page.selectOption('#filter-value', { label: 'ui-web' });
    await page.waitForFunction(() => (globalThis as unknown as { document: PageDocument }).document.querySelectorAll('[data-testid=token-table] tbody tr').length === 1);
    expect(await page.textContent('[data-testid=token-table] tbody')).toContain('ui token');
    await page.screenshot({ path: join(SHOTS, 'token-list.png'), fullPage: true });

    // Its effective policies: the linked one, the role's, and the service identity's.
    await page.click(`a:has-text("${accessor}")`);
    const effective = page.locator('[data-testid=effective-policies]');
    await effective.waitFor();
    await page.waitForSelector('[data-testid=effective-policies] h3');
    const names = await page.locator('[data-testid=effective-policies] h3').allTextContents();
    expect(names).toContain('ui-web');
    // The service identity's synthetic policy, with its rendered rules.
    expect(names.some((n) => n.startsWith('synthetic-policy-')), names.join(', ')).toBe(true);
    expect(await effective.textContent()).toContain('service "billing"');
    expect(await page.textContent('[data-testid=secret]')).toMatch(/^[0-9a-f-]{36}$/);
    await page.click('[data-testid=copy-secret]');
    await page.waitForSelector('button:has-text("Copied")');
    await page.screenshot({ path: join(SHOTS, 'token-detail.png'), fullPage: true });

    // Test a permission with the token's own secret: its service identity may write billing, not payments.
    await page.selectOption('#perm-resource', 'service');
    await page.fill('#perm-segment', 'billing');
    await page.selectOption('#perm-access', 'write');
    await page.click('[data-testid=permission-test] button:has-text("Check")');
    expect(await (await page.waitForSelector('[data-testid=permission-answer]')).textContent()).toMatch(/^allow/);
    await page.fill('#perm-segment', 'payments');
    await page.click('[data-testid=permission-test] button:has-text("Check")');
    expect(await (await page.waitForSelector('[data-testid=permission-answer]')).textContent()).toMatch(/^deny/);

    // Clone, then delete the clone (confirmed).
    await page.click('button:has-text("Clone")');
    await page.waitForSelector('h1:has-text("Clone of ui token")');
    const clone = page.url().split('/').pop() as string;
    expect(clone).not.toBe(accessor);
    await page.click('button:has-text("Delete")');
    await page.waitForURL(/#\/tokens$/);
    const res = await fetch(`${cluster.get('dc1').url}/v1/acl/token/${clone}`, { headers: { 'X-Service-Token': cluster.managementToken } });
    expect(res.status).toBe(404);
    expect((await fetch(`${cluster.get('dc1').url}/v1/acl/token/${accessor}`, { headers: { 'X-Service-Token': cluster.managementToken } })).status).toBe(200);

    // Narrow screens: still one column of readable content.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: join(SHOTS, 'token-list-390.png'), fullPage: true });
    expect(await page.evaluate(() => (globalThis as unknown as { document: PageDocument }).document.documentElement.scrollWidth)).toBeLessThanOrEqual(390 + 1);
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.click('button:has-text("Sign out")');
  }, 120_000);

  it('shows a read-only token <hidden> secrets and no edit buttons', async () => {
    await signIn(readSecret);
    expect(await page.textContent('[data-testid=whoami]')).toContain('read-only');
    await page.waitForSelector('[data-testid=token-table] tbody tr');
    expect(await page.locator('text=Create token').count()).toBe(0);
    await page.click('[data-testid=token-table] a >> nth=0');
    await page.waitForSelector('[data-testid=secret]');
    expect(await page.textContent('[data-testid=secret]')).toBe('<hidden>');
    expect(await page.locator('[data-testid=copy-secret]').count()).toBe(0);
    for (const label of ['Edit', 'Clone', 'Delete']) expect(await page.locator(`main button:has-text("${label}"), main a:has-text("${label}")`).count()).toBe(0);
    await page.click('header >> text=Policies');
    await page.click('td >> text=ui-web');
    await page.waitForSelector('#p-rules');
    expect(await page.locator('main button').count()).toBe(0);
    await page.click('button:has-text("Sign out")');
  }, 60_000);

  it('lists both datacenters with replication status and lag, and switches to dc2', async () => {
    await signIn(cluster.managementToken);
    await page.click('header >> text=Datacenters');
    await page.waitForSelector('tr[data-dc=dc2]');
    expect(await page.textContent('tr[data-dc=dc1]')).toContain('Primary');
    const dc2 = await page.textContent('tr[data-dc=dc2]');
    expect(dc2).toContain('Connected');
    expect(await page.textContent('tr[data-dc=dc2] [data-testid=lag]')).toMatch(/^\d+$/);
    await page.screenshot({ path: join(SHOTS, 'datacenters.png'), fullPage: true });
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
    await page.waitForFunction(() => !((globalThis as unknown as { document: PageDocument }).document.body.textContent ?? '').includes('only in dc2'));
  }, 60_000);

  it('never puts a secret in a URL, and its pages allow no other origin', async () => {
    expect(requested.length).toBeGreaterThan(20);
    for (const url of requested) {
      expect(url).not.toContain(cluster.managementToken);
      expect(url).not.toContain(readSecret);
      expect(new URL(url).origin).toBe(new URL(cluster.get('dc1').url).origin);
    }
    for (const path of ['/ui/', '/ui/app.js', '/ui/api/']) {
      const csp = (await fetch(`${cluster.get('dc1').url}${path}`)).headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toMatch(/https?:|\*|data:.*script/);
    }
  });

  it('serves the API reference from the OpenAPI document', async () => {
    for (const path of ['/ui/api', '/docs']) {
      const res = await fetch(`${cluster.get('dc1').url}${path}`, { redirect: 'manual' });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('/ui/api/');
    }
    await page.goto(`${cluster.get('dc1').url}/ui/api/`);
    await page.waitForSelector('.opblock', { timeout: 20_000 });
    expect(await page.textContent('body')).toContain('/v1/acl/token');
    expect(await page.locator('.opblock').count()).toBeGreaterThan(30);
  }, 60_000);
});
