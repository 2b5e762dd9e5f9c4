import { execFile, execFileSync } from 'node:child_process';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliRun, runWatchword } from '../helpers/cli.js';
import { watchwordCommand } from '../../src/testing/command.js';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';
import { tempDir } from '../helpers/temp-dir.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

type Run = CliRun;
const watchword = runWatchword;

/** Runs the real `watchword` executable (as a user would), for the smoke test. */
function executable(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...watchwordCommand(), ...args],
      { cwd: ROOT, env: { ...process.env, WATCHWORD_HTTP_ADDR: '', WATCHWORD_HTTP_TOKEN: '', ...env }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const field = (out: string, key: string) => new RegExp(`^${key}:\\s+(.*)$`, 'm').exec(out)?.[1];

// Every command line runs in this process (the same command tree the executable runs, its output captured),
// against a real daemon; the help test also runs the real executable.
describe('watchword acl (the command tree against a real daemon)', () => {
  let d: TestDaemon;
  let dir: { path: string; remove: () => Promise<void> };
  let env: Record<string, string>;

  beforeAll(async () => {
    d = await startTestDaemon();
    dir = await tempDir();
    env = { WATCHWORD_HTTP_ADDR: d.url, WATCHWORD_HTTP_TOKEN: d.management };
  });
  afterAll(async () => {
    await d.close();
    await dir.remove();
  });

  it('walks through policy, role and token management with Consul-style flags', async () => {
    const rulesFile = join(dir.path, 'reader.hcl');
    await writeFile(rulesFile, 'acl = "read"\nservice_prefix "" {\n  policy = "read"\n}\n');

    const policy = await watchword(['acl', 'policy', 'create', '-name', 'reader', '-description', 'reads', '-rules', `@${rulesFile}`], env);
    expect(policy.code, policy.stderr).toBe(0);
    expect(field(policy.stdout, 'Name')).toBe('reader');
    expect(policy.stdout).toContain('Rules:\nacl = "read"');
    await watchword(['acl', 'policy', 'create', '-name=extra', '-rules=acl = "read"'], env);

    const role = await watchword(['acl', 'role', 'create', '-name', 'auditors', '-policy-name', 'reader'], env);
    expect(role.code, role.stderr).toBe(0);
    const roleID = field(role.stdout, 'ID') as string;
    expect(role.stdout).toMatch(/Policies:\n {3}[0-9a-f-]{36} - reader/);

    const token = await watchword(
      ['acl', 'token', 'create', '-description', 'web auditor', '-role-name', 'auditors', '-service-identity', 'web:dc1,dc2'],
      env,
    );
    expect(token.code, token.stderr).toBe(0);
    const id = field(token.stdout, 'AccessorID') as string;
    expect(field(token.stdout, 'Description')).toBe('web auditor');
    expect(token.stdout).toContain(`Roles:\n   ${roleID} - auditors`);
    expect(token.stdout).toContain('Service Identities:\n   web (Datacenters: dc1, dc2)');

    const read = await watchword(['acl', 'token', 'read', '-id', id], env);
    expect(read.code).toBe(0);
    expect(field(read.stdout, 'SecretID')).toBe(field(token.stdout, 'SecretID'));

    const merged = await watchword(['acl', 'token', 'update', '-id', id, '-policy-name', 'extra', '-merge-policies'], env);
    expect(merged.code, merged.stderr).toBe(0);
    expect(merged.stdout).toMatch(/Policies:\n {3}[0-9a-f-]{36} - extra/);
    expect(merged.stdout).toContain(`Roles:\n   ${roleID} - auditors`);
    expect(merged.stdout).toContain('Service Identities:\n   web (Datacenters: dc1, dc2)');

    const clone = await watchword(['acl', 'token', 'clone', '-id', id, '-description', 'copy'], env);
    expect(clone.code).toBe(0);
    const cloneID = field(clone.stdout, 'AccessorID') as string;
    expect(cloneID).not.toBe(id);

    // A rotation by an AccessorID prefix: a new secret, the old one kept for the overlap (printed), the rest unchanged.
    const rotated = await watchword(['acl', 'token', 'rotate', '-id', cloneID.slice(0, 8), '-overlap', '10m'], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(field(rotated.stdout, 'AccessorID')).toBe(cloneID);
    expect(field(rotated.stdout, 'SecretID')).not.toBe(field(clone.stdout, 'SecretID'));
    expect(Date.parse(field(rotated.stdout, 'Old Secret Until') as string) - Date.now()).toBeGreaterThan(9 * 60_000);
    expect(field(rotated.stdout, 'Description')).toBe('copy');
    const tooLong = await watchword(['acl', 'token', 'rotate', '-id', cloneID, '-overlap', '48h'], env);
    expect([tooLong.code, tooLong.stderr]).toEqual([1, expect.stringContaining('Invalid Overlap: must be between 0 and 24h, got 48h')]);

    const list = await watchword(['acl', 'token', 'list', '-role-id', roleID], env);
    expect(list.code).toBe(0);
    expect(list.stdout.split('\n')[0]).toMatch(/^AccessorID\s+Description\s+Local\s+Policies\s+Roles\s+Expires\s+Last used$/);
    expect(list.stdout).toContain(id);
    expect(list.stdout).toContain(cloneID);
    // Just made: not unused for a minute; unused for no time at all, yes (never used: judged by CreateTime).
    const unused = await watchword(['acl', 'token', 'list', '-unused-since', '1m', '-format', 'json'], env);
    expect(unused.code).toBe(0);
    expect(JSON.parse(unused.stdout).map((t: { AccessorID: string }) => t.AccessorID)).not.toContain(id);
    const unusedNow = await watchword(['acl', 'token', 'list', '-unused-since', '0s', '-format', 'json'], env);
    expect(JSON.parse(unusedNow.stdout).map((t: { AccessorID: string }) => t.AccessorID)).toContain(cloneID);
    const badDuration = await watchword(['acl', 'token', 'list', '-unused-since', 'soon'], env);
    expect([badDuration.code, badDuration.stderr]).toEqual([1, expect.stringContaining('unused-since')]);
    // -limit: the first N of the whole list, in its order.
    const all = JSON.parse((await watchword(['acl', 'token', 'list', '-format', 'json'], env)).stdout) as Array<{ AccessorID: string }>;
    expect(all.length).toBeGreaterThan(2);
    const two = await watchword(['acl', 'token', 'list', '-limit', '2', '-format', 'json'], env);
    expect(JSON.parse(two.stdout).map((t: { AccessorID: string }) => t.AccessorID)).toEqual(all.slice(0, 2).map((t) => t.AccessorID));
    expect((await d.api('GET', '/v1/acl/tokens')).body.map((t: { AccessorID: string }) => t.AccessorID)).toEqual(
      all.map((t) => t.AccessorID),
    );

    const del = await watchword(['acl', 'token', 'delete', '-id', id], env);
    expect(del.code).toBe(0);
    expect(del.stdout.trim()).toBe(`Token "${id}" deleted successfully`);
    const gone = await watchword(['acl', 'token', 'read', '-id', id], env);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('(HTTP 404 NOT_FOUND)');
  });

  it('prints exactly the API JSON with -format json', async () => {
    const created = await watchword(['acl', 'token', 'create', '-description', 'json please', '-format', 'json'], env);
    expect(created.code).toBe(0);
    const fromCli = JSON.parse(created.stdout);
    const fromApi = (await d.api('GET', `/v1/acl/token/${fromCli.AccessorID}`)).body;
    expect(fromCli).toEqual(fromApi);
    const deleted = await watchword(['acl', 'token', 'delete', '-id', fromCli.AccessorID, '-format', 'json'], env);
    expect(deleted.stdout.trim()).toBe('true');
  });

  it.each([
    ['an unknown command', ['acl', 'nonsense'], /unknown command 'nonsense'/],
    ['an unknown flag', ['acl', 'token', 'list', '-colour'], /unknown option '-colour'/],
    ['a missing -accessor-id', ['acl', 'token', 'read'], /missing required flag -accessor-id/],
    ['a node identity without a datacenter', ['acl', 'token', 'create', '-node-identity', 'node1'], /expected NAME:DATACENTER/],
    ['-var without a templated policy', ['acl', 'token', 'create', '-var', 'name:web'], /-var needs a -templated-policy/],
    ['a bad -format', ['acl', 'token', 'list', '-format', 'xml'], /Allowed choices are pretty, table, json/],
    ['a bad -limit', ['acl', 'policy', 'list', '-limit', '0'], /-limit: expected a whole number of at least 1/],
    ['an unreadable rules file', ['acl', 'policy', 'create', '-name', 'x', '-rules', '@/no/such/file.hcl'], /ENOENT/],
  ])('exits 2 on %s', { concurrent: true }, async (_name, args, message) => {
    const res = await watchword(args, env);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(message);
  });

  it("writes Commander's own errors as every other error, and the agent's flags under their own heading", async () => {
    const unknown = await watchword(['acl', 'nonsense'], env);
    expect(unknown.stderr).toMatch(/^Error: unknown command 'nonsense'/);
    // The agent is the executable's (the in-process CLI has the client commands only).
    const help = execFileSync(process.execPath, [...watchwordCommand(), 'agent', '-help'], { encoding: 'utf8' });
    expect(help).toContain('\nAgent Options\n');
    expect(help).not.toContain('HTTP API Options');
    expect(help.replace(/\s+/g, ' ')).toContain('[env WATCHWORD_AGENT_HTTP_ADDR, then WATCHWORD_HTTP_ADDR]');
  });

  it('exits 1 with the server message on API errors: 409, 404, 403', async () => {
    await watchword(['acl', 'policy', 'create', '-name', 'taken'], env);
    const conflict = await watchword(['acl', 'policy', 'create', '-name', 'taken'], env);
    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toContain('Invalid Policy: A Policy with Name "taken" already exists (HTTP 409 CONFLICT)');

    const missing = await watchword(['acl', 'role', 'read', '-name', 'nobody'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('(HTTP 404 NOT_FOUND)');

    const unknown = await watchword(['acl', 'token', 'list', '-token', crypto.randomUUID()], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('ACL not found (HTTP 403 ACL_NOT_FOUND)');

    const reader = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'reader' }] } })).body;
    const denied = await watchword(['acl', 'policy', 'create', '-name', 'nope', '-token', reader.SecretID], env);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain(`lacks permission 'acl:write'; decided by policy "reader": acl = "read" (HTTP 403 PERMISSION_DENIED)`);
  });

  it('acl authorize prints allow (exit 0) or deny (exit 2) for the token, and exits 1 naming a bad check', async () => {
    const policy = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'cli-web', Rules: 'service "web" { policy = "write" }' } })).body;
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: policy.ID }] } })).body;
    const allow = await watchword(
      ['acl', 'authorize', '-resource', 'service', '-segment', 'web', '-access', 'write', '-token', t.SecretID],
      env,
    );
    expect(allow).toMatchObject({ code: 0, stdout: 'allow\n' });
    const deny = await watchword(
      ['acl', 'authorize', '-resource', 'service', '-segment', 'api', '-access', 'write', '-token', t.SecretID],
      env,
    );
    expect(deny).toMatchObject({ code: 2, stdout: 'deny\n' });
    const why = await watchword(
      ['acl', 'authorize', '-resource', 'service', '-segment', 'api', '-access', 'write', '-explain', '-token', t.SecretID],
      env,
    );
    expect(why).toMatchObject({ code: 2, stdout: 'deny: the default policy: default_policy = "deny"\n' });
    const whyAllowed = await watchword(
      [
        'acl',
        'authorize',
        '-resource',
        'service',
        '-segment',
        'web',
        '-access',
        'read',
        '-explain',
        '-token',
        t.SecretID,
        '-format',
        'json',
      ],
      env,
    );
    expect(JSON.parse(whyAllowed.stdout)).toEqual({
      Resource: 'service',
      Segment: 'web',
      Access: 'read',
      Allow: true,
      Reason: { Source: 'policy', ID: policy.ID, Name: 'cli-web', Rule: 'service "web" { policy = "write" }' },
    });
    const json = await watchword(['acl', 'authorize', '-resource', 'acl', '-access', 'read', '-format', 'json'], env);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ Resource: 'acl', Access: 'read', Allow: true });
    const bad = await watchword(['acl', 'authorize', '-resource', 'servce', '-segment', 'web', '-access', 'read'], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('checks[0]: unknown resource "servce"');
  });

  it('acl who-can lists the tokens and roles granted a check with the rule; policy update -dry-run changes nothing and prints the flips', async () => {
    const policy = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'cli-sessions', Rules: 'session "s1" { policy = "write" }' } }))
      .body;
    const role = (await d.api('PUT', '/v1/acl/role', { body: { Name: 'cli-session-role', Policies: [{ ID: policy.ID }] } })).body;
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'sessions', Policies: [{ ID: policy.ID }] } })).body;
    const who = await watchword(['acl', 'who-can', '-resource', 'session', '-segment', 's1', '-access', 'write'], env);
    expect(who.code, who.stderr).toBe(0);
    expect(who.stdout).toContain('Who can session "s1" write in default/default:');
    expect(who.stdout).toContain(
      `   ${role.ID} - cli-session-role: role "cli-session-role" policy "cli-sessions": session "s1" { policy = "write" }`,
    );
    expect(who.stdout).toContain(`   ${t.AccessorID} "sessions": policy "cli-sessions": session "s1" { policy = "write" }`);
    const json = JSON.parse(
      (await watchword(['acl', 'who-can', '-resource', 'session', '-segment', 's1', '-access', 'write', '-format', 'json'], env)).stdout,
    );
    expect(json.Tokens.map((x: { AccessorID: string }) => x.AccessorID)).toContain(t.AccessorID);
    const limited = await watchword(['acl', 'who-can', '-resource', 'session', '-segment', 's1', '-access', 'write', '-limit', '1'], env);
    expect(limited.stdout).toContain('(more: -limit was reached)');

    // The token asks once; a dry run of a change taking it away says so, and changes nothing.
    await d.api('POST', '/v1/internal/acl/authorize', {
      token: t.SecretID,
      body: [{ Resource: 'session', Segment: 's1', Access: 'write' }],
    });
    const dry = await watchword(
      ['acl', 'policy', 'update', '-id', policy.ID, '-rules', 'session "s2" { policy = "write" }', '-dry-run'],
      env,
    );
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(
      /^Tokens reached: 1 \(1 with checks asked in the last hour, 1 checks judged again\)\nCheck\s+Answer\s+Tokens\s+Example\nsession "s1" write\s+allow -> deny\s+1\s+/,
    );
    expect((await d.api('GET', `/v1/acl/policy/${policy.ID}`)).body.Rules).toBe('session "s1" { policy = "write" }');
    const roleDry = await watchword(['acl', 'role', 'update', '-id', role.ID, '-no-merge', '-dry-run'], env);
    expect(roleDry.stdout).toContain('Tokens reached: 0');
  });

  it('finds the daemon with -http-addr and says so when it cannot', async () => {
    const ok = await watchword(['acl', 'policy', 'list', '-http-addr', d.url.replace('http://', ''), '-token', d.management]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('global-management');
    const down = await watchword(['acl', 'policy', 'list', '-http-addr', '127.0.0.1:9'], env);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain('cannot talk to watchword at http://127.0.0.1:9');
  });

  it('covers roles, policies, templated policies and replication status', async () => {
    const update = await watchword(
      [
        'acl',
        'role',
        'update',
        '-id',
        field((await watchword(['acl', 'role', 'read', '-name', 'auditors'], env)).stdout, 'ID') as string,
        '-description',
        'changed',
        '-node-identity',
        'n1:dc1',
      ],
      env,
    );
    expect(update.code, update.stderr).toBe(0);
    expect(update.stdout).toContain('Description: changed');
    expect(update.stdout).toMatch(/Policies:\n {3}[0-9a-f-]{36} - reader/);
    expect(update.stdout).toContain('Node Identities:\n   n1 (Datacenter: dc1)');
    const pol = await watchword(['acl', 'policy', 'update', '-name', 'extra', '-description', 'now described'], env);
    expect(pol.code, pol.stderr).toBe(0);
    expect(pol.stdout).toContain('Rules:\nacl = "read"');
    const list = await watchword(['acl', 'templated-policy', 'list'], env);
    expect(list.stdout).toMatch(/builtin\/service\s+Name/);
    const preview = await watchword(['acl', 'templated-policy', 'preview', '-name', 'builtin/service', '-var', 'name:api'], env);
    expect(preview.code, preview.stderr).toBe(0);
    expect(preview.stdout).toContain('service "api-sidecar-proxy"');
    const tmpl = await watchword(['acl', 'token', 'create', '-templated-policy', 'builtin/node', '-var', 'name:node-9'], env);
    expect(tmpl.stdout).toContain('Templated Policies:\n   builtin/node (Name: node-9)');
    const repl = await watchword(['acl', 'replication'], env);
    expect(repl.code).toBe(0);
    expect(field(repl.stdout, 'Enabled')).toBe('false');
    const roleDel = await watchword(['acl', 'role', 'delete', '-name', 'auditors'], env);
    expect(roleDel.stdout).toMatch(/^Role "[0-9a-f-]{36}" deleted successfully/);
  });

  it('manages auth methods and binding rules, and logs in and out', async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const pem = await exportSPKI(publicKey);
    await writeFile(join(dir.path, 'method.json'), JSON.stringify({ JWTValidationPubKeys: [pem], ClaimMappings: { svc: 'service' } }));
    const created = await watchword(
      [
        'acl',
        'auth-method',
        'create',
        '-type',
        'jwt',
        '-name',
        'ci',
        '-max-token-ttl',
        '30m',
        '-config',
        `@${join(dir.path, 'method.json')}`,
      ],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
    expect(field(created.stdout, 'Name')).toBe('ci');
    expect(field(created.stdout, 'MaxTokenTTL')).toBe('30m0s');
    const rule = await watchword(
      [
        'acl',
        'binding-rule',
        'create',
        '-method',
        'ci',
        '-bind-type',
        'service',
        '-bind-name',
        '${value.service}',
        '-selector',
        'value.service != ""',
      ],
      env,
    );
    expect(rule.code, rule.stderr).toBe(0);
    expect(field(rule.stdout, 'BindName')).toBe('${value.service}');
    const ruleID = field(rule.stdout, 'ID') as string;
    const rules = await watchword(['acl', 'binding-rule', 'list', '-method', 'ci'], env);
    expect(rules.stdout).toContain(ruleID);
    const methods = await watchword(['acl', 'auth-method', 'list'], env);
    expect(methods.stdout).toMatch(/^ci\s+jwt\s+/m);
    const updated = await watchword(['acl', 'auth-method', 'update', '-name', 'ci', '-description', 'for CI jobs'], env);
    expect(field(updated.stdout, 'Description')).toBe('for CI jobs');
    expect(field(updated.stdout, 'MaxTokenTTL')).toBe('30m0s');

    const bearer = await new SignJWT({ svc: 'deployer' }).setProtectedHeader({ alg: 'RS256' }).setExpirationTime('5m').sign(privateKey);
    await writeFile(join(dir.path, 'bearer.jwt'), bearer);
    const sink = join(dir.path, 'token.txt');
    const login = await watchword(
      ['login', '-method', 'ci', '-bearer-token-file', join(dir.path, 'bearer.jwt'), '-token-sink-file', sink],
      { WATCHWORD_HTTP_ADDR: d.url },
    );
    expect(login.code, login.stderr).toBe(0);
    const secret = (await readFile(sink, 'utf8')).trim();
    expect((await stat(sink)).mode & 0o777).toBe(0o600);
    const self = await d.api('GET', '/v1/acl/token/self', { token: secret });
    expect(self.body.ServiceIdentities).toEqual([{ ServiceName: 'deployer' }]);
    expect(self.body.AuthMethod).toBe('ci');
    const logout = await watchword(['logout', '-token', secret], { WATCHWORD_HTTP_ADDR: d.url });
    expect(logout.code, logout.stderr).toBe(0);
    expect((await d.api('GET', '/v1/acl/token/self', { token: secret })).status).toBe(403);
    const notLogin = await watchword(['logout'], env);
    expect(notLogin.code).toBe(1);
    expect(notLogin.stderr).toContain('the token was not created by a login');

    const del = await watchword(['acl', 'auth-method', 'delete', '-name', 'ci'], env);
    expect(del.stdout).toContain('Auth method "ci" deleted successfully');
    expect((await watchword(['acl', 'binding-rule', 'read', '-id', ruleID], env)).code).toBe(1);
  });

  it('lists flags with descriptions in every --help, and exits 0', async () => {
    // The real executable once (the agent command lives only there), in-process for the rest.
    const top = await executable(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/^Usage: watchword <subcommand> \[options\] \[args\]$/m);
    expect(top.stdout).toMatch(/^ {4}agent +run the watchword daemon/m);
    expect(top.stdout).toMatch(/^ {4}acl +manage ACL tokens/m);
    const agent = await executable(['agent', '--help']);
    expect(agent.code).toBe(0);
    expect(agent.stdout).toMatch(/^ {2}-tls-cert-file=<FILE>\n {5}\S/m);
    for (const args of [
      ['acl', '--help'],
      ['acl', 'token', 'create', '--help'],
      ['acl', 'token', 'update', '-help'],
      ['acl', 'policy', 'create', '--help'],
      ['tls', 'cert', 'create', '--help'],
    ]) {
      const res = await watchword(args);
      expect(res.code, args.join(' ')).toBe(0);
    }
    const create = await watchword(['acl', 'token', 'create', '--help']);
    // Consul's shape: one dash, a value placeholder, the description indented below.
    for (const flag of [
      '-http-addr=<ADDR>',
      '-token=<SECRET>',
      '-token-file=<FILE>',
      '-policy-name=<NAME>',
      '-role-name=<NAME>',
      '-service-identity=<NAME[:DC1,DC2]>',
      '-node-identity=<NAME:DC>',
      '-templated-policy=<NAME>',
      '-var=<name:VALUE>',
      '-expires-ttl=<DURATION>',
      '-local',
      '-description=<TEXT>',
      '-format=<FORMAT>',
    ]) {
      expect(create.stdout).toMatch(new RegExp(`^  ${flag.replace(/[[\]]/g, '\\$&')}\n {5}\\S`, 'm'));
    }
    expect(create.stdout).not.toMatch(/--[a-z]/);
    const update = await watchword(['acl', 'token', 'update', '--help']);
    for (const flag of ['-append-policy-name', '-append-role-id', '-append-service-identity', '-merge-policies', '-merge-roles'])
      expect(update.stdout).toContain(`\n  ${flag}`);
  });
});
