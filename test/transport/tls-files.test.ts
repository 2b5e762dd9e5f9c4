import { spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { watchwordCommand } from '../../src/testing/command.js';
import { createCA, createCert } from '../../src/transport/certs.js';
import { TlsFileError } from '../../src/transport/tls-files.js';
import { Transport } from '../../src/transport/transport.js';
import { tempDir } from '../helpers/temp-dir.js';

// Start-up refuses TLS files that cannot serve, with one line naming the setting, the file
// and the problem (docs/tls.md, "TLS"): checked in process for every case, and as the agent's exit.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const logger = pino({ level: 'silent' });

describe('TLS files at start-up', () => {
  let dir: { path: string; remove: () => Promise<void> };
  const f = (name: string) => join(dir.path, name);

  beforeAll(async () => {
    dir = await tempDir();
    const ca = await createCA({ domain: 'watchword', days: 2 });
    const server = await createCert(ca, { kind: 'server', datacenter: 'dc1', domain: 'watchword', days: 2 });
    const other = await createCert(ca, { kind: 'server', datacenter: 'dc1', domain: 'watchword', days: 2 });
    await writeFile(f('ca.pem'), ca.cert);
    await writeFile(f('server.pem'), server.cert);
    await writeFile(f('server-key.pem'), server.key);
    await writeFile(f('other-key.pem'), other.key);
    await writeFile(f('garbage.pem'), 'hello\n');
  });

  afterAll(async () => {
    await dir.remove();
  });

  const settings = (over: Partial<{ caFile: string; certFile: string; keyFile: string; verifyIncoming: boolean }>) => ({
    caFile: f('ca.pem'),
    certFile: f('server.pem'),
    keyFile: f('server-key.pem'),
    verifyIncoming: false,
    verifyOutgoing: true,
    verifyServerHostname: true,
    domain: 'watchword',
    minVersion: 'TLSv1.2' as const,
    ...over,
  });
  const make = (over: Parameters<typeof settings>[0]) =>
    new Transport({ datacenter: 'dc1', tls: settings(over), serverKey: undefined, logger });

  it('accepts a certificate, its key and a CA', () => {
    const t = make({});
    expect(t.secure).toBe(true);
    expect(t.listenerOptions()).toMatchObject({ requestCert: true, rejectUnauthorized: false, minVersion: 'TLSv1.2' });
    expect(t.serverName('dc2')).toBe('server.dc2.watchword');
  });

  it.each([
    ['a missing certificate', { certFile: 'nowhere.pem' }, /^tls_cert_file .*nowhere\.pem: cannot read it \(ENOENT\)$/],
    ['a certificate file that is not one', { certFile: 'garbage.pem' }, /^tls_cert_file .*garbage\.pem: holds no PEM certificate$/],
    ['a key file that is not one', { keyFile: 'garbage.pem' }, /^tls_key_file .*garbage\.pem: holds no PEM private key$/],
    [
      "a key that is not the certificate's",
      { keyFile: 'other-key.pem' },
      /^tls_key_file .*other-key\.pem: is not the key of the certificate in tls_cert_file .*server\.pem$/,
    ],
    ['a CA file that is not a certificate', { caFile: 'server-key.pem' }, /^tls_ca_file .*server-key\.pem: holds no PEM certificate$/],
    ['verify_incoming without a CA', { caFile: undefined, verifyIncoming: true }, /^tls_verify_incoming is on but tls_ca_file is not set/],
  ])('refuses %s with one line naming the setting, the file and the problem', (_what, over, message) => {
    const resolved = Object.fromEntries(Object.entries(over).map(([k, v]) => [k, typeof v === 'string' ? f(v) : v]));
    let error: unknown;
    try {
      make(resolved);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(TlsFileError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('\n');
  });

  it('the agent exits 1 with that line, before it opens anything', async () => {
    const data = join(dir.path, 'data');
    const run = spawnSync(
      process.execPath,
      [
        ...watchwordCommand(),
        'agent',
        '--data-dir',
        data,
        '--http-addr',
        '127.0.0.1:0',
        '--tls-cert-file',
        f('server.pem'),
        '--tls-key-file',
        f('other-key.pem'),
      ],
      {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 30_000,
        env: { ...process.env, WATCHWORD_LIFELINE: '' },
      },
    );
    expect(run.status).toBe(1);
    expect(run.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        /^watchword: cannot start: tls_key_file .*other-key\.pem: is not the key of the certificate in tls_cert_file .*server\.pem$/,
      ),
    ]);
    const several = spawnSync(
      process.execPath,
      [...watchwordCommand(), 'agent', '--data-dir', data, '--coordinator', 'etcd://127.0.0.1:1'],
      { cwd: ROOT, encoding: 'utf8', timeout: 30_000 },
    );
    expect(several.status).not.toBe(0);
    expect(several.stderr).toMatch(/server_key: is required: several servers without TLS prove themselves to each other with a shared key/);
  }, 60_000);
});
