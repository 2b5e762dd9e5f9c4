import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDACT_PATHS } from '../../src/observability/logger.js';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

describe('request logging', () => {
  let d: TestDaemon;
  let lines: string[];

  beforeAll(async () => {
    lines = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(...chunk.toString().split('\n').filter(Boolean));
        done();
      },
    });
    const logger = pino({ level: 'trace', redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, sink);
    d = await startTestDaemon({ logger });
  });
  afterAll(() => d.close());

  it('logs one line per request with route, status and duration, and never a secret', async () => {
    const anon = apiFor(d.url);
    const known = (await d.api('PUT', '/v1/acl/token', { body: {} })).body.SecretID as string;
    const chosen = crypto.randomUUID();
    const unknown = crypto.randomUUID();
    const oddSecret = 'not-a-uuid-secret-value-123';
    const secrets = [d.management, known, chosen, unknown, oddSecret];

    // Secrets in every header and the query string, valid and not.
    for (const s of [known, unknown, oddSecret]) {
      await anon('GET', '/v1/acl/token/self', { headers: { 'X-Service-Token': s } });
      await anon('GET', '/v1/acl/tokens', { headers: { 'X-Consul-Token': s } });
      await anon('GET', '/v1/acl/policies', { headers: { Authorization: `Bearer ${s}` } });
      await anon('GET', `/v1/acl/roles?token=${s}`);
      await anon('GET', `/v1/acl/token/${s}?token=${s}`);
      await anon('DELETE', `/v1/acl/token/${s}`, { headers: { 'X-Service-Token': s } });
    }
    // Secrets in bodies, on success and on error paths.
    await d.api('PUT', '/v1/acl/token', { body: { SecretID: chosen } });
    await d.api('PUT', '/v1/acl/token', { body: { SecretID: chosen } });
    await d.api('PUT', '/v1/acl/token', { body: { SecretID: oddSecret } });
    await d.api('PUT', '/v1/acl/token', { body: { AccessorID: known } });
    await d.api('PUT', '/v1/acl/token', { rawBody: `{"SecretID": "${unknown}", ` });
    await d.api('PUT', `/v1/acl/token/${crypto.randomUUID()}`, { body: { SecretID: unknown } });
    await anon('PUT', '/v1/acl/bootstrap', { body: { BootstrapSecret: unknown } });
    await anon('PUT', `/v1/acl/token?token=${oddSecret}%zz`, { body: {} });
    await anon('GET', `/v1/acl/tokens?token=${known}&token=${unknown}`);
    await anon('GET', `/v1/nowhere/${known}?token=${known}`);

    const text = lines.join('\n');
    for (const s of secrets) expect(text, `secret ${s} leaked into the log`).not.toContain(s);

    const requests = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request');
    // 18 header/query requests, 10 body and error-path requests, 1 setup create: each logged once.
    expect(requests.length).toBe(29);
    for (const r of requests) {
      expect(typeof r.reqId).toBe('string');
      expect(typeof r.route).toBe('string');
      expect(typeof r.status).toBe('number');
      expect(typeof r.durationMs).toBe('number');
    }
    expect(requests.some((r) => r.route === '/v1/acl/token/:AccessorID' && r.status === 400)).toBe(true);
  });

  it('redacts secrets inside objects that code logs', () => {
    const captured: string[] = [];
    const logger = pino(
      { redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
      new Writable({
        write: (c: Buffer, _e, done) => {
          captured.push(c.toString());
          done();
        },
      }),
    );
    logger.info(
      {
        token: { SecretID: 'secret-1', AccessorID: 'a' },
        headers: { authorization: 'Bearer secret-2', 'x-consul-token': 'secret-3' },
        replication_token: 'secret-4',
      },
      'x',
    );
    const out = captured.join('');
    for (const s of ['secret-1', 'secret-2', 'secret-3', 'secret-4']) expect(out).not.toContain(s);
  });
});

describe("the agent's logger", () => {
  it('in JSON mode writes every line as JSON with level names, Node warnings included, to stdout and the log file', async () => {
    const { execFile } = await import('node:child_process');
    const { readFile, readdir } = await import('node:fs/promises');
    const { join } = await import('node:path');
    const { tempDir } = await import('../helpers/temp-dir.js');
    const dir = await tempDir();
    try {
      const file = join(dir.path, 'logs', 'watchword.log');
      const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) =>
        execFile(process.execPath, ['--import', 'tsx', 'test/fixtures/agent-logger.ts', file], { timeout: 30_000 }, (err, out, errOut) =>
          err ? reject(err) : resolve({ stdout: out, stderr: errOut }),
        ),
      );
      expect(stderr).toBe('');
      const lines = stdout.trim().split('\n');
      expect(lines.length).toBe(3);
      const parsed = lines.map((l) => JSON.parse(l) as { level: string; msg: string; code?: string });
      expect(parsed.map((l) => l.level)).toEqual(['info', 'warn', 'warn']);
      expect(parsed[1]).toMatchObject({ code: 'DEP0123', msg: expect.stringContaining('TLS ServerName') });
      const files = await readdir(join(dir.path, 'logs'));
      expect(files.length).toBe(1);
      const written = (await readFile(join(dir.path, 'logs', files[0] as string), 'utf8')).trim().split('\n');
      expect(written.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(parsed.map((l) => l.msg));
    } finally {
      await dir.remove();
    }
  });
});
