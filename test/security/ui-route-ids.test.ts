import { existsSync } from 'node:fs';
import { type Browser, type Page, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

/**
 * Fourth security review, finding 7: the web UI pasted route IDs into API paths unencoded after
 * decoding them, so `/ui/#/roles/..%2Fpolicy%2F<id>` showed the policy as "Role web" and its
 * Delete deleted the policy. Every value the UI puts in a path is now encoded whole (dots and
 * slashes too), and a page whose route names an object by ID refuses anything but a UUID.
 */
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser', process.env.WATCHWORD_CHROMIUM ?? ''].find((p) => p && existsSync(p));

describe.skipIf(!CHROMIUM)('the web UI and IDs in its routes', () => {
  let d: TestDaemon;
  let browser: Browser;
  let page: Page;
  let policyID = '';
  const calls: string[] = [];

  beforeAll(async () => {
    d = await startTestDaemon();
    policyID = ((await d.api('PUT', '/v1/acl/policy', { body: { Name: 'web', Rules: 'acl = "read"' } })).body as { ID: string }).ID;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await (await browser.newContext()).newPage();
    page.on('dialog', (dialog) => void dialog.accept());
    page.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/v1/')) calls.push(`${r.method()} ${new URL(r.url()).pathname}`);
    });
    await page.goto(`${d.url}/ui/`);
    await page.fill('#secret', d.management);
    await page.click('button[type=submit]');
    await page.waitForSelector('header.bar');
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await d?.close();
  });

  it('refuses a role route that climbs to a policy: no policy shown, nothing deleted', async () => {
    calls.length = 0;
    await page.goto(`${d.url}/ui/#/roles/..%2Fpolicy%2F${policyID}`);
    // The page settles: a refusal, or (as before) an editor showing what it loaded.
    await page.waitForSelector('[role=alert], button:has-text("Delete")');
    // Whatever the page offers, pressing Delete (if it shows one) must not reach the policy.
    const del = page.locator('button:has-text("Delete")');
    if ((await del.count()) > 0) {
      await del.first().click();
      await page.waitForTimeout(500);
    }
    expect((await d.api('GET', `/v1/acl/policy/${policyID}`)).status).toBe(200);
    expect(calls.filter((c) => c.includes(`/policy/${policyID}`))).toEqual([]);
    expect(await page.locator('[role=alert]').textContent()).toMatch(/is not the ID of one of the roles/);
  });

  it('sends a name from the route as one encoded path segment (an auth method named ../policy/ID is just a name)', async () => {
    calls.length = 0;
    await page.goto(`${d.url}/ui/#/auth-methods/..%2Fpolicy%2F${policyID}`);
    await page.waitForSelector('[role=alert]');
    expect(calls).toContain(`GET /v1/acl/auth-method/%2E%2E%2Fpolicy%2F${policyID}`);
    expect(calls.filter((c) => c.includes(`/policy/${policyID}`))).toEqual([]);
    expect((await d.api('GET', `/v1/acl/policy/${policyID}`)).status).toBe(200);
  });

  it('still opens a role by its ID', async () => {
    const role = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'readers', Policies: [{ ID: policyID }] } })).body as { ID: string };
    await page.goto(`${d.url}/ui/#/roles/${role.ID}`);
    await page.waitForSelector('text=readers');
    expect(calls).toContain(`GET /v1/acl/role/${role.ID}`);
  });
});
