import { type Server, createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { createCA, createCert } from '../../src/transport/certs.js';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';
import { tempDir } from '../helpers/temp-dir.js';

// The CLI as an operator who knows `consul acl` uses it: token files and Consul's environment
// variables, unique-prefix IDs, `read -self`, `-append-…`, `-rules -`, `-meta`, `-stale`,
// `-tls-server-name`, and help in Consul's shape (golden files).

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** A command line in this process with exactly this environment (and standard input). */
async function watchword(args: string[], env: Record<string, string> = {}, stdin?: string): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, {
    out: (t) => void (stdout += t),
    err: (t) => void (stderr += t),
    env,
    setExitCode: () => undefined,
    ...(stdin !== undefined ? { readStdin: async () => stdin } : {}),
  });
  return { code, stdout, stderr };
}

const field = (out: string, key: string) => new RegExp(`^${key}:\\s+(.*)$`, 'm').exec(out)?.[1];

describe('the CLI with Consul habits', () => {
  let d: TestDaemon;
  let dir: { path: string; remove: () => Promise<void> };
  let env: Record<string, string>;
  let tokenFile = '';

  beforeAll(async () => {
    d = await startTestDaemon();
    dir = await tempDir();
    tokenFile = join(dir.path, 'token');
    await writeFile(tokenFile, `${d.management}\n`, { mode: 0o600 });
    env = { WATCHWORD_HTTP_ADDR: d.url, WATCHWORD_HTTP_TOKEN_FILE: tokenFile };
  });
  afterAll(async () => {
    await d.close();
    await dir.remove();
  });

  it("takes the token from -token-file and the address and token from Consul's variables", async () => {
    const self = (args: string[], e: Record<string, string>) => watchword(['acl', 'token', 'read', '-self', ...args], e);
    const byFlag = await self(['-http-addr', d.url, '-token-file', tokenFile], {});
    expect(byFlag.code, byFlag.stderr).toBe(0);
    expect(field(byFlag.stdout, 'Description')).toBe('Initial Management Token');
    const envs: Array<Record<string, string>> = [
      { WATCHWORD_HTTP_ADDR: d.url, WATCHWORD_HTTP_TOKEN_FILE: tokenFile },
      { CONSUL_HTTP_ADDR: d.url, CONSUL_HTTP_TOKEN: d.management },
      { CONSUL_HTTP_ADDR: d.url.replace('http://', ''), CONSUL_HTTP_TOKEN_FILE: tokenFile },
    ];
    for (const e of envs) {
      const res = await self([], e);
      expect(res.code, `${JSON.stringify(Object.keys(e))}: ${res.stderr}`).toBe(0);
      expect(field(res.stdout, 'SecretID')).toBe(d.management);
    }
    // WATCHWORD_* first: a Consul token in the environment does not override ours.
    const both = await self([], { WATCHWORD_HTTP_ADDR: d.url, WATCHWORD_HTTP_TOKEN: d.management, CONSUL_HTTP_TOKEN: 'consul-secret' });
    expect(both.code).toBe(0);
    const missing = await self(['-token-file', join(dir.path, 'nope')], { WATCHWORD_HTTP_ADDR: d.url });
    expect([missing.code, missing.stderr]).toEqual([
      2,
      `Error: cannot read the token file ${join(dir.path, 'nope')} (-token-file): ENOENT\n`,
    ]);
    await writeFile(join(dir.path, 'empty'), '\n');
    const empty = await self([], { WATCHWORD_HTTP_ADDR: d.url, CONSUL_HTTP_TOKEN_FILE: join(dir.path, 'empty') });
    expect([empty.code, empty.stderr]).toEqual([2, `Error: the token file ${join(dir.path, 'empty')} (CONSUL_HTTP_TOKEN_FILE) is empty\n`]);
    // read-self stays, as before.
    expect((await watchword(['acl', 'token', 'read-self'], env)).code).toBe(0);
    expect((await watchword(['acl', 'token', 'read', '-self', '-id', 'x'], env)).stderr).toBe(
      'Error: give -accessor-id or -self, not both\n',
    );
  });

  it('finds tokens, policies and roles by a unique prefix of their ID', async () => {
    for (const accessor of ['abcd0000-0000-4000-8000-000000000001', 'abcd1111-0000-4000-8000-000000000002']) {
      expect(
        (await watchword(['acl', 'token', 'create', '-accessor', accessor, '-description', `prefix ${accessor.slice(4, 5)}`], env)).code,
      ).toBe(0);
    }
    const one = await watchword(['acl', 'token', 'read', '-id', 'abcd1'], env);
    expect(one.code, one.stderr).toBe(0);
    expect(field(one.stdout, 'AccessorID')).toBe('abcd1111-0000-4000-8000-000000000002');
    // Nothing (or more than one thing) to act on is not a usage error: exit 1, as Consul's CLI.
    const both = await watchword(['acl', 'token', 'read', '-id', 'abcd'], env);
    expect(both.code).toBe(1);
    expect(both.stderr).toMatch(/^Error: Error determining token ID: Partial token ID is not unique \(abcd matches 2: /);
    const none = await watchword(['acl', 'token', 'delete', '-id', 'ffff9'], env);
    expect([none.code, none.stderr]).toEqual([1, 'Error: Error determining token ID: No such token ID with prefix: ffff9\n']);
    const updated = await watchword(['acl', 'token', 'update', '-id', 'abcd0', '-description', 'by prefix'], env);
    expect(field(updated.stdout, 'AccessorID')).toBe('abcd0000-0000-4000-8000-000000000001');
    expect(field(updated.stdout, 'Description')).toBe('by prefix');

    const policy = await watchword(['acl', 'policy', 'create', '-name', 'prefixed', '-rules', 'acl = "read"'], env);
    const policyID = field(policy.stdout, 'ID') as string;
    expect(field((await watchword(['acl', 'policy', 'read', '-id', policyID.slice(0, 8)], env)).stdout, 'Name')).toBe('prefixed');
    expect(field((await watchword(['acl', 'policy', 'read', '-id', 'global-management'], env)).stdout, 'Name')).toBe('global-management');
    const role = await watchword(['acl', 'role', 'create', '-name', 'prefixed-role', '-policy-name', 'prefixed'], env);
    const roleID = field(role.stdout, 'ID') as string;
    expect(field((await watchword(['acl', 'role', 'read', '-id', roleID.slice(0, 6)], env)).stdout, 'Name')).toBe('prefixed-role');
    // The list filters name a policy or role as reads do: a prefix, or a name; nothing matching is an error, not "(none)".
    const member = await watchword(
      ['acl', 'token', 'create', '-role-name', 'prefixed-role', '-policy-name', 'prefixed', '-description', 'in the role'],
      env,
    );
    const memberID = field(member.stdout, 'AccessorID') as string;
    for (const filter of [
      ['-role-id', roleID.slice(0, 6)],
      ['-role-name', 'prefixed-role'],
      ['-policy-id', policyID.slice(0, 8)],
      ['-policy-name', 'prefixed'],
    ]) {
      const listed = await watchword(['acl', 'token', 'list', ...filter, '-format', 'json'], env);
      expect(listed.code, `${filter.join(' ')}: ${listed.stderr}`).toBe(0);
      expect((JSON.parse(listed.stdout) as Array<{ AccessorID: string }>).map((t) => t.AccessorID)).toContain(memberID);
    }
    const noRole = await watchword(['acl', 'token', 'list', '-role-name', 'no-such-role'], env);
    expect([noRole.code, noRole.stderr]).toEqual([1, 'Error: Cannot find role with name "no-such-role" (HTTP 404 NOT_FOUND)\n']);
    const noPrefix = await watchword(['acl', 'token', 'list', '-role-id', 'ffff9'], env);
    expect([noPrefix.code, noPrefix.stderr]).toEqual([1, 'Error: Error determining role ID: No such role ID with prefix: ffff9\n']);
    expect((await watchword(['acl', 'role', 'delete', '-id', roleID.slice(0, 6)], env)).stdout).toBe(
      `Role "${roleID}" deleted successfully\n`,
    );
  });

  it('adds links with -append-…, replaces them with the plain flags, and keeps kinds not named', async () => {
    for (const name of ['a1', 'a2', 'a3']) expect((await watchword(['acl', 'policy', 'create', '-name', name], env)).code).toBe(0);
    const t = await watchword(['acl', 'token', 'create', '-policy-name', 'a1', '-service-identity', 'web'], env);
    const id = field(t.stdout, 'AccessorID') as string;
    const appended = await watchword(
      ['acl', 'token', 'update', '-id', id, '-append-policy-name', 'a2', '-append-node-identity', 'n1:dc1'],
      env,
    );
    expect(appended.code, appended.stderr).toBe(0);
    expect(appended.stdout).toMatch(/Policies:\n {3}\S+ - a1\n {3}\S+ - a2\n/);
    expect(appended.stdout).toContain('Service Identities:\n   web (Datacenters: all)');
    expect(appended.stdout).toContain('Node Identities:\n   n1 (Datacenter: dc1)');
    const replaced = await watchword(['acl', 'token', 'update', '-id', id, '-policy-name', 'a3'], env);
    expect(replaced.stdout).toMatch(/Policies:\n {3}\S+ - a3\n(?! {3})/);
    expect(replaced.stdout).toContain('Service Identities:\n   web (Datacenters: all)');
  });

  it('reads -rules from standard input with -rules -, and from a file with @FILE', async () => {
    const stdin = await watchword(
      ['acl', 'policy', 'create', '-name', 'from-stdin', '-rules', '-'],
      env,
      'service "web" {\n  policy = "read"\n}\n',
    );
    expect(stdin.code, stdin.stderr).toBe(0);
    expect(stdin.stdout).toContain('Rules:\nservice "web" {\n  policy = "read"\n}\n');
    await writeFile(join(dir.path, 'rules.hcl'), 'acl = "read"\n');
    const file = await watchword(['acl', 'policy', 'update', '-name', 'from-stdin', '-rules', `@${join(dir.path, 'rules.hcl')}`], env);
    expect(file.stdout).toContain('Rules:\nacl = "read"\n');
  });

  it('shows Hash and indices with -meta only, the same rows for every kind', async () => {
    const plain = await watchword(['acl', 'policy', 'read', '-name', 'a1'], env);
    expect(plain.stdout).not.toMatch(/^(Hash|Create Index|Modify Index):/m);
    const meta = await watchword(['acl', 'policy', 'read', '-name', 'a1', '-meta'], env);
    expect(meta.stdout).toMatch(/^Hash: +\S+\nCreate Index: +\d+\nModify Index: +\d+\n/m);
    const token = await watchword(['acl', 'token', 'read', '-self', '-meta'], env);
    expect(token.stdout).toMatch(/^Hash: +\S+\nCreate Index: +\d+\nModify Index: +\d+\n/m);
    expect((await watchword(['acl', 'token', 'read', '-self'], env)).stdout).not.toMatch(/^Hash:/m);
  });

  it('sends reads with ?stale when -stale is given, and writes without it', async () => {
    const seen: string[] = [];
    const server: Server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(req.method === 'GET' ? '[]' : 'true');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const addr = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      await watchword(['acl', 'policy', 'list', '-stale'], { WATCHWORD_HTTP_ADDR: addr, WATCHWORD_HTTP_TOKEN: 'x' });
      await watchword(['acl', 'policy', 'list'], { WATCHWORD_HTTP_ADDR: addr, WATCHWORD_HTTP_TOKEN: 'x' });
      await watchword(['acl', 'token', 'delete', '-id', '6a531f0e-5dc5-4a43-8a4e-0d4ee0b1d9a1', '-stale'], {
        WATCHWORD_HTTP_ADDR: addr,
        WATCHWORD_HTTP_TOKEN: 'x',
      });
      // Lists are fetched a page at a time.
      expect(seen).toEqual([
        'GET /v1/acl/policies?per_page=1000&stale=',
        'GET /v1/acl/policies?per_page=1000',
        'DELETE /v1/acl/token/6a531f0e-5dc5-4a43-8a4e-0d4ee0b1d9a1',
      ]);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("verifies the daemon's certificate for -tls-server-name (also CONSUL_TLS_SERVER_NAME)", async () => {
    const ca = await createCA({ domain: 'watchword', days: 1 });
    const cert = await createCert(ca, { kind: 'server', datacenter: 'dc1', domain: 'watchword', days: 1 });
    const caFile = join(dir.path, 'tls', 'ca.pem');
    await mkdir(join(dir.path, 'tls'), { recursive: true });
    await writeFile(caFile, ca.cert);
    const server = createHttpsServer({ cert: cert.cert, key: cert.key }, (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('[]');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const addr = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const base = { WATCHWORD_HTTP_ADDR: addr, WATCHWORD_HTTP_TOKEN: 'x', CONSUL_CACERT: caFile };
      expect((await watchword(['acl', 'policy', 'list', '-tls-server-name', 'server.dc1.watchword'], base)).code).toBe(0);
      expect((await watchword(['acl', 'policy', 'list'], { ...base, CONSUL_TLS_SERVER_NAME: 'server.dc1.watchword' })).code).toBe(0);
      const wrong = await watchword(['acl', 'policy', 'list', '-tls-server-name', 'server.dc9.watchword'], base);
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toContain("the daemon's certificate is not trusted (ERR_TLS_CERT_ALTNAME_INVALID)");
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("prints help in Consul's shape", async () => {
    for (const [args, file] of [
      [['acl', 'token', 'create', '-help'], 'help-token-create.txt'],
      [['acl', 'token', 'update', '-h'], 'help-token-update.txt'],
      [['acl', 'policy', 'create', '--help'], 'help-policy-create.txt'],
      [['acl', 'token', '-help'], 'help-token.txt'],
    ] as const) {
      const res = await watchword([...args], {});
      expect(res.code).toBe(0);
      await expect(res.stdout).toMatchFileSnapshot(`golden/${file}`);
    }
  });
});
