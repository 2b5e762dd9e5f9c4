import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdBinary, freePort } from '../../src/testing/etcd.js';
import { spawnAgent } from '../helpers/process.js';
import { tempDir } from '../helpers/temp-dir.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** etcd, which docs/servers.md starts (CI installs it; a machine without it skips that block, saying so). */
const etcd = etcdBinary();

/** The shell blocks of a Markdown file marked `<!-- docs-test: NAME -->` on the line before them, by name. */
function markedBlocks(markdown: string): Map<string, string> {
  const blocks = new Map<string, string>();
  const re = /<!-- docs-test: ([\w-]+) -->\n```sh\n([\s\S]*?)\n```/g;
  for (const m of markdown.matchAll(re)) blocks.set(m[1] as string, m[2] as string);
  return blocks;
}

/**
 * Runs a README block as a person pastes it into a fresh shell at the top of a checkout: in a
 * directory holding the repository's config files, its built `dist/` and `node_modules/`, with
 * the fixed ports the block names moved to free ones (so the suite runs anywhere, in parallel).
 */
async function pasted(
  block: string,
  ports: Record<number, number>,
  env: Record<string, string> = {},
): Promise<{ code: number | null; out: string }> {
  const dir = await tempDir();
  cleanups.push(() => dir.remove());
  await mkdir(join(dir.path, 'config'));
  const fixed = new RegExp(`\\b(${Object.keys(ports).join('|')})\\b`, 'g');
  const move = (text: string) => text.replace(fixed, (p) => String(ports[Number(p)] ?? p));
  for (const n of [1, 2, 3]) {
    const file = join('config', `dc${n}.json`);
    await writeFile(join(dir.path, file), move(await readFile(join(ROOT, file), 'utf8')));
  }
  for (const shared of ['node_modules', 'dist']) await symlink(join(ROOT, shared), join(dir.path, shared));
  return new Promise((resolve) => {
    // A group of its own: what the block left running (daemons in the background of a failed block) is ended with it.
    const shell = spawn('bash', ['-e', '-c', move(block)], {
      cwd: dir.path,
      env: { ...process.env, TOKEN: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    shell.stdout.on('data', (b: Buffer) => (out += b.toString()));
    shell.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const group = (signal: NodeJS.Signals) => {
      try {
        process.kill(-(shell.pid as number), signal);
      } catch {
        // the group has ended
      }
    };
    const timer = setTimeout(() => group('SIGKILL'), 60_000);
    shell.on('exit', (code) => {
      clearTimeout(timer);
      group('SIGKILL');
      resolve({ code, out });
    });
  });
}

/** The block marked `NAME` in a page of the repository (README.md, docs/…), which must have it. */
async function blockOf(page: string, name: string): Promise<string> {
  const block = markedBlocks(await readFile(join(ROOT, page), 'utf8')).get(name);
  expect(block, `${page} has a block marked docs-test: ${name}`).toBeDefined();
  return block as string;
}

/** Each fixed port a block names, moved to a free one. */
async function freePorts(fixed: number[]): Promise<Record<number, number>> {
  const ports: Record<number, number> = {};
  for (const p of fixed) ports[p] = await freePort();
  return ports;
}

/** A block that starts etcd, pasted with etcd's folder on the PATH. */
const withEtcd = (block: string, ports: Record<number, number>) =>
  pasted(block, ports, { PATH: `${dirname(etcd as string)}:${process.env.PATH}` });

const cleanups: Array<() => Promise<void>> = [];

describe("README's blocks, pasted into a fresh shell", () => {
  afterAll(async () => {
    for (const c of cleanups.splice(0)) await c().catch(() => undefined);
  });

  // One run of the quick start for both: its three daemons serve docs/cli.md's walk-through before they stop.
  it("the quick start: three datacenters replicate, forward and keep Local tokens; docs/cli.md's walk-through in its shell; then stop", async () => {
    const quick = await blockOf('README.md', 'quick-start');
    const cli = await blockOf('docs/cli.md', 'cli-walk-through');
    // The quick start up to its stop, the walk-through, then the stop.
    const [running, stop] = quick.split(/\n(?=# stop the three daemons)/) as [string, string];
    expect(stop, 'the quick start ends with its stop').toMatch(/^# stop the three daemons/);
    const ports = { 8500: await freePort(), 8501: await freePort(), 8502: await freePort() };
    const { code, out } = await pasted(`${running}\n${cli}\n${stop}`, ports);
    expect(code, out).toBe(0);
    expect(out).not.toContain('bootstrap refused');
    const quickOut = out.slice(0, out.indexOf('web auditor'));
    const json = quickOut
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    // The policy as written at dc1 and as read at dc3: the same, Hash included.
    const [written, atDc3] = json.filter((j) => j.Name === 'demo');
    expect(written).toMatchObject({ Name: 'demo', Rules: 'acl = "read"' });
    expect(atDc3).toEqual(written);
    expect(json.find((j) => j.Description === 'via dc2')).toMatchObject({ Local: false });
    expect(json.find((j) => j.Description === 'dc2 only')).toMatchObject({ Local: true });
    expect(json.find((j) => 'ReplicatedIndex' in j)).toMatchObject({ Enabled: true, Running: true, SourceDatacenter: 'dc1' });
    // The CLI read at dc3.
    expect(quickOut).toMatch(/^Name:\s+demo$/m);
    // The walk-through: a token read at dc2 as at dc1, cloned, deleted at the end.
    const accessor = /^AccessorID:\s+(\S+)$/m.exec(out.slice(out.indexOf('web auditor')))?.[1];
    expect(accessor).toMatch(/^[0-9a-f-]{36}$/);
    expect(out.match(new RegExp(`^AccessorID:\\s+${accessor}$`, 'gm'))?.length).toBeGreaterThanOrEqual(4);
    expect(out).toContain('web auditor (copy)');
    expect(out).toContain('dc2 only');
    expect(out).toContain(`Token "${accessor}" deleted successfully`);
  }, 120_000);

  it.skipIf(!etcd)(
    `docs/servers.md's three servers and etcd on one machine elect a leader and list each other${etcd ? '' : ' (skipped: etcd is not installed)'}`,
    async () => {
      const ports = await freePorts([2379, 2380, 8511, 8512, 8513]);
      const { code, out } = await withEtcd(await blockOf('docs/servers.md', 'three-servers'), ports);
      expect(code, out).toBe(0);
      const servers = [8511, 8512, 8513].map((p) => `127.0.0.1:${ports[p]}`);
      const leader = JSON.parse(out.split('\n').find((l) => l.startsWith('"')) ?? '""') as string;
      expect(servers).toContain(leader);
      const view = JSON.parse(out.split('\n').find((l) => l.startsWith('{')) ?? '{}') as { Servers?: Array<{ Address: string }> };
      expect(view.Servers?.map((s) => s.Address).sort()).toEqual([...servers].sort());
    },
    90_000,
  );

  it.skipIf(!etcd)(
    `docs/tls.md's three datacenters over TLS, etcd included, replicate and answer the CLI${etcd ? '' : ' (skipped: etcd is not installed)'}`,
    async () => {
      const ports = await freePorts([2379, 2380, 8521, 8522, 8523, 8621, 8721]);
      const { code, out } = await withEtcd(await blockOf('docs/tls.md', 'tls'), ports);
      expect(code, out).toBe(0);
      // The policy read at dc2 over TLS, the servers' view, and dc2's replication status.
      expect(out).toMatch(/^Name:\s+over-tls$/m);
      expect(out.match(/^Name:\s+over-tls$/gm)?.length).toBeGreaterThanOrEqual(2);
      for (const name of ['dc1-s0', 'dc1-s1', 'dc1-s2']) expect(out).toMatch(new RegExp(`^${name}\\s`, 'm'));
      const status = JSON.parse(out.split('\n').find((l) => l.startsWith('{"Enabled"')) ?? '{}') as Record<string, unknown>;
      expect(status).toMatchObject({ Enabled: true, Running: true, SourceDatacenter: 'dc1', Connected: true });
    },
    120_000,
  );

  it('the walk-through with curl, against the daemon npm start runs', async () => {
    const block = await blockOf('README.md', 'walk-through');
    const dir = await tempDir();
    cleanups.push(() => dir.remove());
    const port = await freePort();
    const agent = await spawnAgent(join(dir.path, 'dc1'), [], { WATCHWORD_HTTP_ADDR: `127.0.0.1:${port}` });
    cleanups.unshift(async () => void (await agent.stop()));
    // docs/enforcing-client.md's decisions, asked with the walk-through's token.
    const authorize = await blockOf('docs/enforcing-client.md', 'authorize');
    // docs/operator-insight.md's rotation and docs/audit.md's reads, in the same shell.
    const rotate = await blockOf('docs/operator-insight.md', 'rotate');
    const audit = await blockOf('docs/audit.md', 'audit');
    const login = await blockOf('docs/http-api.md', 'login');
    const error = await blockOf('README.md', 'error');
    const { code, out } = await pasted(`${block}\n${authorize}\necho\n${rotate}\n${audit}\n${login}\n${error}`, { 8500: port });
    expect(code, out).toBe(0);
    const json = out
      .split('\n')
      .filter((l) => l.startsWith('{') || l.startsWith('['))
      .map((l) => JSON.parse(l) as Record<string, unknown> | Array<Record<string, unknown>>);
    expect(json[0]).toMatchObject({ Description: 'Bootstrap Token (Global Management)' });
    expect(out).toContain('Permission denied: ACL bootstrap no longer allowed (reset index: ');
    const [read, listed, self] = json.slice(1) as [Record<string, unknown>, Array<Record<string, unknown>>, Record<string, unknown>];
    expect(read).toMatchObject({ Description: 'auditor', Policies: [{ Name: 'acl-reader' }] });
    expect(listed.map((t) => t.AccessorID)).toEqual([read.AccessorID]);
    expect(self).toMatchObject({ AccessorID: read.AccessorID, Description: 'auditor' });
    // The auditor holds acl:read only: both checks denied, each named.
    // The rotation answered a new secret, then the CLI's rotation its own, with the overlap's end.
    expect(out).toMatch(/^[0-9a-f-]{36}$/m);
    expect(out).toMatch(/^Old Secret Until:/m);
    // The audit: the walk-through's creates, and the refusals the CLI lists.
    expect(json.find((j) => !Array.isArray(j) && 'Events' in j)).toMatchObject({
      Events: expect.arrayContaining([expect.objectContaining({ Type: 'token-create' })]),
    });
    // docs/http-api.md's login: a token of the method, with the service identity its claim names; out again.
    expect(json.find((j) => !Array.isArray(j) && j.AuthMethod === 'ci' && 'AccessorID' in j)).toMatchObject({
      ServiceIdentities: [{ ServiceName: 'web' }],
    });
    expect(out).toMatch(/^true$/m);
    // The README's error: 403, its code in a header, Consul's message as text.
    const answer = out.slice(out.lastIndexOf('HTTP/1.1 '));
    expect(answer).toMatch(/^HTTP\/1\.1 403 Forbidden\r?\n/);
    expect(answer).toMatch(/^x-service-error-code: ACL_NOT_FOUND\r?$/m);
    expect(answer.trimEnd().endsWith('ACL not found')).toBe(true);
    expect(json[4]).toEqual([
      { Resource: 'service', Segment: 'web', Access: 'write', Allow: false },
      { Resource: 'key', Segment: 'web/config', Access: 'list', Allow: false },
    ]);
  }, 90_000);
});

/** GitHub's anchor of a heading. */
const anchorOf = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

describe('the links of README.md and docs/', () => {
  it('each names a file of the repository, and a heading of it when it names one', async () => {
    const { readdir } = await import('node:fs/promises');
    const pages = ['README.md', ...(await readdir(join(ROOT, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    const headings = new Map<string, Set<string>>();
    const text = new Map<string, string>();
    for (const page of pages) {
      const md = await readFile(join(ROOT, page), 'utf8');
      text.set(page, md);
      const outside = md.replace(/```[\s\S]*?```/g, '');
      headings.set(page, new Set([...outside.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchorOf(m[1] as string))));
    }
    const broken: string[] = [];
    for (const [page, md] of text) {
      for (const m of md.replace(/```[\s\S]*?```/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = m[1] as string;
        if (/^https?:|^mailto:/.test(link)) continue;
        const [file, anchor] = link.split('#') as [string, string | undefined];
        const target = file === '' ? page : join(dirname(page), file);
        if (!existsSync(join(ROOT, target))) broken.push(`${page}: ${link} (no ${target})`);
        else if (anchor && headings.has(target) && !headings.get(target)?.has(anchor)) broken.push(`${page}: ${link} (no heading)`);
      }
    }
    expect(broken).toEqual([]);
  });
});
