import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { tempDir } from '../helpers/temp-dir.js';

describe('loadConfig', () => {
  let dir: { path: string; remove: () => Promise<void> };
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(() => dir.remove());

  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      datacenter: 'dc1',
      primary_datacenter: 'dc1',
      http_addr: '127.0.0.1:8500',
      data_dir: './data/dc1',
      default_policy: 'deny',
      token_min_ttl: 60_000,
      token_max_ttl: 86_400_000,
      reap_interval: 1000,
      durability: 'fsync',
      log_retention: 100_000,
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('layers defaults < files (in order) < environment < flags', async () => {
    const a = join(dir.path, 'a.json');
    const b = join(dir.path, 'b.json');
    await writeFile(a, JSON.stringify({ datacenter: 'east', node_name: 'from-a', reap_interval: '5s', log_level: 'warn' }));
    await writeFile(b, JSON.stringify({ node_name: 'from-b', http_addr: '127.0.0.1:9000' }));
    const c = loadConfig({
      files: [a, b],
      env: { WATCHWORD_HTTP_ADDR: '127.0.0.1:9100', WATCHWORD_LOG_LEVEL: 'error', UNRELATED: 'x' },
      flags: { log_level: 'debug' },
    });
    expect(c.datacenter).toBe('east');
    expect(c.primary_datacenter).toBe('east');
    expect(c.data_dir).toBe('./data/east');
    expect(c.node_name).toBe('from-b');
    expect(c.reap_interval).toBe(5000);
    expect(c.http_addr).toBe('127.0.0.1:9100');
    expect(c.log_level).toBe('debug');
  });

  it("takes the CLI's form of WATCHWORD_HTTP_ADDR (a base URL), and WATCHWORD_AGENT_HTTP_ADDR before it, saying where it came from", () => {
    const origins = new Map<string, string>();
    const shared = loadConfig({ env: { WATCHWORD_HTTP_ADDR: 'http://127.0.0.1:8501' }, origins });
    expect(shared.http_addr).toBe('127.0.0.1:8501');
    expect(origins.get('http_addr')).toBe('env WATCHWORD_HTTP_ADDR');
    expect(loadConfig({ env: { WATCHWORD_HTTP_ADDR: 'https://[::1]:8443/' } }).http_addr).toBe('[::1]:8443');
    const own = new Map<string, string>();
    const agent = loadConfig({
      env: { WATCHWORD_HTTP_ADDR: 'http://127.0.0.1:8501', WATCHWORD_AGENT_HTTP_ADDR: '127.0.0.1:8600' },
      origins: own,
    });
    expect(agent.http_addr).toBe('127.0.0.1:8600');
    expect(own.get('http_addr')).toBe('env WATCHWORD_AGENT_HTTP_ADDR');
    // A URL with a path says nothing of where to listen.
    expect(() => loadConfig({ env: { WATCHWORD_HTTP_ADDR: 'http://127.0.0.1:8501/v1' } })).toThrow(/http_addr: expected HOST:PORT/);
  });

  it('lists every problem, naming the key and its source', async () => {
    const file = join(dir.path, 'bad.json');
    await writeFile(file, JSON.stringify({ durability: 'maybe', colour: 'blue' }));
    let error: unknown;
    try {
      loadConfig({ files: [file], env: { WATCHWORD_TOKEN_MAX_TTL: 'forever' }, flags: { http_addr: 'localhost' } });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    expect(problems).toContain(`colour: unknown setting (from ${file})`);
    expect(problems).toContain(`durability:`);
    expect(problems).toContain(`(from ${file})`);
    expect(problems).toContain('token_max_ttl: expected a duration');
    expect(problems).toContain('(from env WATCHWORD_TOKEN_MAX_TTL)');
    expect(problems).toContain('http_addr: expected HOST:PORT');
    expect(problems).toContain('(from flag --http-addr)');
  });

  it('refuses unreadable files, min above max, and a secondary without a primary address', async () => {
    const broken = join(dir.path, 'broken.json');
    await writeFile(broken, '{ not json');
    expect(() => loadConfig({ files: [broken] })).toThrow(/cannot read JSON config/);
    expect(() => loadConfig({ flags: { token_min_ttl: '2h', token_max_ttl: '1h' } })).toThrow(
      /token_min_ttl: must not exceed token_max_ttl/,
    );
    expect(() => loadConfig({ flags: { replication_backoff_min: '1m', replication_backoff_max: '2s' } })).toThrow(
      /replication_backoff_min: must not exceed replication_backoff_max/,
    );
    expect(() => loadConfig({ flags: { recent_checks_window: '30s' } })).toThrow(/recent_checks_window: must be at least 1m/);
    expect(loadConfig({}).recent_checks_window).toBe(3_600_000);
    expect(loadConfig({ flags: { recent_checks_window: '8m' } }).recent_checks_window).toBe(480_000);
    expect(loadConfig({ flags: { replication_backoff_min: '100ms', replication_max_stale: '30s' } })).toMatchObject({
      replication_backoff_min: 100,
      replication_backoff_max: 2000,
      replication_max_stale: 30_000,
    });
    expect(() => loadConfig({ flags: { datacenter: 'dc2', primary_datacenter: 'dc1' } })).toThrow(
      /primary_address: is required on a secondary/,
    );
    expect(
      loadConfig({ flags: { datacenter: 'dc2', primary_datacenter: 'dc1', primary_address: 'http://127.0.0.1:8500' } }).primary_address,
    ).toBe('http://127.0.0.1:8500');
  });

  it('refuses one of two settings that go together without the other, naming the missing one', () => {
    expect(() => loadConfig({ flags: { tls_cert_file: '/c.pem' } })).toThrow(/tls_key_file: tls_cert_file and tls_key_file go together/);
    expect(() => loadConfig({ flags: { etcd_key_file: '/k.pem' } })).toThrow(
      /etcd_cert_file: etcd_cert_file and etcd_key_file go together/,
    );
    expect(() => loadConfig({ flags: { etcd_username: 'u' } })).toThrow(/etcd_password: etcd_username and etcd_password go together/);
    expect(loadConfig({ flags: { etcd_username: 'u', etcd_password: 'p' } }).etcd.auth).toEqual({ username: 'u', password: 'p' });
  });
});
