import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';
import { tempDir } from '../helpers/temp-dir.js';

async function watchword(args: string[], env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const code = await runCli(args, {
    out: () => undefined,
    err: (t) => void (stderr += t),
    env: { WATCHWORD_HTTP_TOKEN: '', ...env },
    setExitCode: () => undefined,
  });
  return { code, stderr };
}

const modeOf = async (path: string) => ((await stat(path)).mode & 0o777).toString(8);

/**
 * Third security review, finding 8: `snapshot save FILE` and `login -token-sink-file FILE` over
 * an existing world-readable file left it 0644, now holding secrets. Every file the CLI writes
 * that holds a secret ends 0600, created or not.
 */
describe('files the CLI writes secrets into are 0600, even when they existed', () => {
  let d: TestDaemon;
  let dir: Awaited<ReturnType<typeof tempDir>>;
  beforeAll(async () => {
    d = await startTestDaemon();
    dir = await tempDir();
  });
  afterAll(async () => {
    await d.close();
    await dir.remove();
  });

  it('snapshot save over a 0644 file', async () => {
    const file = join(dir.path, 'backup.snap');
    await writeFile(file, 'old contents');
    await chmod(file, 0o644);
    expect(await modeOf(file)).toBe('644');
    const r = await watchword(['snapshot', 'save', file], { WATCHWORD_HTTP_ADDR: d.url, WATCHWORD_HTTP_TOKEN: d.management });
    expect(r.code, r.stderr).toBe(0);
    expect(await modeOf(file)).toBe('600');
    // The snapshot holds the management token's secret.
    expect((await readFile(file)).includes(Buffer.from(d.management))).toBe(true);
  });

  it('login -token-sink-file over a 0644 file', async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const method = await d.api('PUT', '/v1/acl/auth-method', {
      body: {
        Name: 'sink',
        Type: 'jwt',
        Config: { JWTValidationPubKeys: [await exportSPKI(publicKey)], ClaimMappings: { svc: 'service' } },
      },
    });
    expect(method.status).toBe(200);
    expect(
      (await d.api('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: 'sink', BindType: 'service', BindName: '${value.service}' } }))
        .status,
    ).toBe(200);
    const bearer = join(dir.path, 'bearer.jwt');
    await writeFile(
      bearer,
      await new SignJWT({ svc: 'web' }).setProtectedHeader({ alg: 'RS256' }).setExpirationTime('5m').sign(privateKey),
    );
    const sink = join(dir.path, 'token');
    await writeFile(sink, '');
    await chmod(sink, 0o644);
    const r = await watchword(['login', '-method', 'sink', '-bearer-token-file', bearer, '-token-sink-file', sink], {
      WATCHWORD_HTTP_ADDR: d.url,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(await modeOf(sink)).toBe('600');
    expect((await d.api('GET', '/v1/acl/token/self', { token: (await readFile(sink, 'utf8')).trim() })).status).toBe(200);
  });
});
