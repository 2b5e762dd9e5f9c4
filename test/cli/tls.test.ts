import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { tempDir } from '../helpers/temp-dir.js';

// `watchword tls ca create`, `watchword tls cert create` and `watchword keygen`, shaped
// like Consul's: files in the working directory, keys 0600, the next free number.

async function watchword(args: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, {
    out: (t) => void (stdout += t),
    err: (t) => void (stderr += t),
    env: {},
    setExitCode: () => undefined,
  });
  return { code, stdout, stderr };
}

describe('watchword tls and keygen', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let cwd: string;

  beforeAll(async () => {
    dir = await tempDir();
    cwd = process.cwd();
    process.chdir(dir.path);
  });

  afterAll(async () => {
    process.chdir(cwd);
    await dir.remove();
  });

  it('makes a CA, server certificates naming server.<dc>.<domain> (numbered), and a client certificate', async () => {
    const ca = await watchword(['tls', 'ca', 'create']);
    expect(ca.code, ca.stderr).toBe(0);
    expect(ca.stdout).toBe('==> Saved watchword-agent-ca.pem\n==> Saved watchword-agent-ca-key.pem\n');
    expect((await stat(join(dir.path, 'watchword-agent-ca-key.pem'))).mode & 0o777).toBe(0o600);
    const caCert = new X509Certificate(await readFile(join(dir.path, 'watchword-agent-ca.pem')));
    expect(caCert.ca).toBe(true);

    expect((await watchword(['tls', 'cert', 'create', '-server', '-dc', 'dc1'])).code).toBe(0);
    const second = await watchword([
      'tls',
      'cert',
      'create',
      '-server',
      '-dc',
      'dc1',
      '-additional-dnsname',
      'watchword.example',
      '-additional-ipaddress',
      '10.1.2.3',
    ]);
    expect(second.stdout).toContain('==> Saved dc1-server-watchword-1.pem');
    const cert = new X509Certificate(await readFile(join(dir.path, 'dc1-server-watchword-1.pem')));
    expect(cert.subjectAltName).toBe(
      'DNS:server.dc1.watchword, DNS:localhost, DNS:watchword.example, IP Address:127.0.0.1, IP Address:10.1.2.3',
    );
    expect(cert.verify(caCert.publicKey)).toBe(true);
    expect(cert.checkPrivateKey(createPrivateKey(await readFile(join(dir.path, 'dc1-server-watchword-1-key.pem'))))).toBe(true);
    expect((await stat(join(dir.path, 'dc1-server-watchword-1-key.pem'))).mode & 0o777).toBe(0o600);

    expect((await watchword(['tls', 'cert', 'create', '-client', '-dc', 'dc2'])).code).toBe(0);
    expect(new X509Certificate(await readFile(join(dir.path, 'dc2-client-watchword-0.pem'))).subjectAltName).toMatch(
      /^DNS:client\.dc2\.watchword/,
    );
  });

  it('refuses to overwrite a CA, a certificate without its kind, and a missing CA, with the reason', async () => {
    const again = await watchword(['tls', 'ca', 'create']);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe('Error: watchword-agent-ca.pem already exists; not overwritten\n');
    const neither = await watchword(['tls', 'cert', 'create', '-dc', 'dc1']);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toContain('give exactly one of -server or -client');
    const noCA = await watchword(['tls', 'cert', 'create', '-server', '-domain', 'other']);
    expect(noCA.code).toBe(1);
    expect(noCA.stderr).toMatch(
      /cannot read the CA \(other-agent-ca\.pem, other-agent-ca-key\.pem\): ENOENT; make one with: watchword tls ca create/,
    );
  });

  it('keygen prints 32 random bytes in base64', async () => {
    const a = await watchword(['keygen']);
    const b = await watchword(['keygen']);
    expect(Buffer.from(a.stdout.trim(), 'base64')).toHaveLength(32);
    expect(a.stdout).not.toBe(b.stdout);
  });
});
