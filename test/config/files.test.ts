import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readConfigFiles } from '../../src/config/files.js';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { watchwordCommand } from '../../src/testing/command.js';
import { apiFor } from '../helpers/test-daemon.js';
import { type AgentProcess, spawnAgent } from '../helpers/process.js';
import { tempDir } from '../helpers/temp-dir.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function watchword(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...watchwordCommand(), ...args], { cwd: ROOT, timeout: 30_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const HCL = `
# A Consul-shaped configuration.
datacenter = "east"
node_name  = "east-1"
http_addr  = "127.0.0.1:0"
token_max_ttl = "12h"

acl {
  enabled        = true
  default_policy = "deny"
  down_policy    = "async-cache"
  tokens {
    initial_management = "hcl-management-secret"
  }
}

tls {
  domain = "example"
}
`;

describe('configuration files in HCL or JSON, several files and directories', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let agent: AgentProcess | undefined;
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(async () => {
    await agent?.stop();
    agent = undefined;
    await dir.remove();
  });

  it("reads HCL with HashiCorp's parser: sections flattened, Consul's acl stanza mapped", async () => {
    const file = join(dir.path, 'watchword.hcl');
    await writeFile(file, HCL);
    const { documents, problems } = await readConfigFiles([file]);
    expect(problems).toEqual([]);
    const c = loadConfig({ documents });
    expect(c).toMatchObject({
      datacenter: 'east',
      node_name: 'east-1',
      token_max_ttl: 12 * 3_600_000,
      default_policy: 'deny',
      down_policy: 'async-cache',
      initial_management_token: 'hcl-management-secret',
    });
    expect(c.tls?.domain ?? c.tls_domain).toBe('example');
  });

  it('merges --config files and then --config-dir files in name order, JSON and HCL alike; later wins', async () => {
    const conf = join(dir.path, 'conf.d');
    await mkdir(conf);
    await writeFile(join(dir.path, 'base.json'), JSON.stringify({ datacenter: 'base', node_name: 'base-node', log_level: 'warn' }));
    await writeFile(join(conf, '10-dc.hcl'), 'datacenter = "ten"\nreap_interval = "5s"\n');
    await writeFile(join(conf, '20-node.json'), JSON.stringify({ node_name: 'twenty' }));
    await writeFile(join(conf, 'ignored.txt'), 'not a config');
    const { documents, problems } = await readConfigFiles([join(dir.path, 'base.json')], [conf]);
    expect(problems).toEqual([]);
    expect(documents.map((d) => d.source.split('/').pop())).toEqual(['base.json', '10-dc.hcl', '20-node.json']);
    expect(loadConfig({ documents })).toMatchObject({ datacenter: 'ten', node_name: 'twenty', log_level: 'warn', reap_interval: 5000 });
  });

  it('lists every problem: HCL syntax with its line, unknown settings and acl keys, bad values', async () => {
    const bad = join(dir.path, 'bad.hcl');
    await writeFile(bad, 'datacenter = "DC 1"\nacl {\n  enabled = false\n  tokens { agent = "x" }\n}\n');
    const broken = join(dir.path, 'broken.hcl');
    await writeFile(broken, 'datacenter = \n');
    const { documents, problems } = await readConfigFiles([bad, broken]);
    let error: ConfigError | undefined;
    try {
      loadConfig({ documents, fileProblems: problems });
    } catch (err) {
      error = err as ConfigError;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const text = error?.problems.join('\n') ?? '';
    expect(text).toContain(`${broken}: not valid HCL: ${broken}:1,`);
    expect(text).toContain('acl.enabled: ACLs are always enforced by watchword');
    expect(text).toContain('acl.tokens.agent: not a token watchword uses');
    expect(text).toMatch(/datacenter: expected a datacenter name .* \(from .*bad\.hcl\)/);
  });

  it("`watchword validate` says a good file is valid (exit 0) and lists a bad file's problems (exit 1)", async () => {
    const good = join(dir.path, 'good.hcl');
    await writeFile(good, HCL);
    const ok = await watchword(['validate', good]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toBe('Configuration is valid!\n');
    const bad = join(dir.path, 'bad.json');
    await writeFile(bad, JSON.stringify({ datacenter: 'x', token_min_ttl: '2h', token_max_ttl: '1h', colour: 'blue' }));
    const refused = await watchword(['validate', bad]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('invalid configuration:');
    expect(refused.stderr).toMatch(/colour: unknown setting/);
    expect(refused.stderr).toMatch(/token_min_ttl: must not exceed token_max_ttl/);
    expect((await watchword(['version'])).stdout).toMatch(/^watchword v\d+\.\d+\.\d+\n/);
  });

  it('starts a daemon from an HCL file', async () => {
    const file = join(dir.path, 'agent.hcl');
    await writeFile(file, HCL.replace('datacenter = "east"', 'datacenter = "dc1"'));
    agent = await spawnAgent(join(dir.path, 'data'), ['--config', file]);
    const api = apiFor(agent.url, 'hcl-management-secret');
    const self = await api('GET', '/v1/acl/token/self');
    expect(self.status).toBe(200);
    expect(self.body.Description).toBe('Initial Management Token');
    expect((await api('GET', '/v1/agent/self')).body.Config).toMatchObject({ NodeName: 'east-1' });
  });

  it('starts an agent on the base URL the CLI reads from WATCHWORD_HTTP_ADDR, and says that it did', async () => {
    agent = await spawnAgent(join(dir.path, 'data'), ['--log-level', 'info'], { WATCHWORD_HTTP_ADDR: 'http://127.0.0.1:0' });
    expect((await apiFor(agent.url)('GET', '/v1/agent/health')).status).toBe(200);
    expect(agent.output()).toContain('the address WATCHWORD_HTTP_ADDR names; the CLI reads that variable too');
  });

  it('listens where WATCHWORD_AGENT_HTTP_ADDR says, whatever WATCHWORD_HTTP_ADDR names', async () => {
    agent = await spawnAgent(join(dir.path, 'data'), ['--log-level', 'info'], {
      WATCHWORD_HTTP_ADDR: 'http://127.0.0.1:1',
      WATCHWORD_AGENT_HTTP_ADDR: '127.0.0.1:0',
    });
    expect((await apiFor(agent.url)('GET', '/v1/agent/health')).status).toBe(200);
    expect(agent.output()).not.toContain('the CLI reads that variable too');
  });
});

describe('config/watchword.service', () => {
  it.skipIf(!existsSync('/usr/bin/systemd-analyze'))('is a unit systemd accepts: own user, state directory, reload by SIGHUP', async () => {
    const unit = join(ROOT, 'config', 'watchword.service');
    const text = await readFile(unit, 'utf8');
    expect(text).toMatch(/^DynamicUser=yes$/m);
    expect(text).toMatch(/^StateDirectory=watchword$/m);
    expect(text).toMatch(/^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
    const out = await new Promise<string>((resolve) =>
      execFile('systemd-analyze', ['verify', unit], (_err, stdout, stderr) => resolve(`${stdout}${stderr}`)),
    );
    // The only complaint allowed: the watchword binary is not installed on this machine.
    const complaints = out.split('\n').filter((l) => l.trim() !== '' && !/\/usr\/local\/bin\/watchword is not executable/.test(l));
    expect(complaints).toEqual([]);
  });
});
