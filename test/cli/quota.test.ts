import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWatchword } from '../helpers/cli.js';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

/** `watchword acl quota …` (docs/cli.md): made, read by name, updated with what is kept, listed, deleted. */
describe('watchword acl quota', () => {
  let d: TestDaemon;
  const cli = (...args: string[]) => runWatchword([...args, '-http-addr', d.url, '-token', d.management]);
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  it('creates, reads, updates (keeping what is not given), lists and deletes a quota', async () => {
    const made = await cli(
      'acl',
      'quota',
      'create',
      '-name',
      'team-a',
      '-namespace',
      'team-a',
      '-max-tokens',
      '2',
      '-max-token-ttl',
      '24h',
    );
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).toMatch(/Name:\s+team-a/);
    expect(made.stdout).toMatch(/Scope:\s+namespace team-a/);
    expect(made.stdout).toMatch(/Used:\s+0 of 2/);
    expect(made.stdout).toMatch(/MaxTokenTTL:\s+24h0m0s/);
    await d.api('PUT', '/v1/acl/token?ns=team-a', { body: {} });

    const read = await cli('acl', 'quota', 'read', '-id', 'team-a', '-format', 'json');
    expect(read.code, read.stderr).toBe(0);
    expect(JSON.parse(read.stdout)).toMatchObject({ Name: 'team-a', Namespace: 'team-a', MaxTokens: 2, Used: 1 });

    const updated = await cli('acl', 'quota', 'update', '-id', 'team-a', '-max-tokens', '5', '-description', 'the A team');
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stdout).toMatch(/Used:\s+1 of 5/);
    expect(updated.stdout).toMatch(/MaxTokenTTL:\s+24h0m0s/);
    expect(updated.stdout).toMatch(/Description:\s+the A team/);

    const list = await cli('acl', 'quota', 'list');
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain('team-a');
    expect(list.stdout).toContain('namespace team-a');

    const deleted = await cli('acl', 'quota', 'delete', '-id', 'team-a');
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toContain('deleted successfully');
    expect((await cli('acl', 'quota', 'read', '-id', 'team-a')).code).not.toBe(0);
  });

  it('refuses a quota with no scope, naming what is wrong, and a bad -max-tokens', async () => {
    const none = await cli('acl', 'quota', 'create', '-name', 'x', '-max-tokens', '3');
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('exactly one of AuthMethod, Namespace or Partition');
    const bad = await cli('acl', 'quota', 'create', '-name', 'x', '-partition', 'p', '-max-tokens', 'many');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('-max-tokens many');
  });
});
