import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { envName, flagName } from '../../src/config/load.js';
import { type ConfigKey, configKeys, configShape } from '../../src/config/schema.js';
import { defaultOf, flagHelp, shortDuration } from '../../src/config/setting-doc.js';

const PAGE = fileURLToPath(new URL('../../docs/configuration.md', import.meta.url));

/** One setting as the reference table lists it: its flag, variable and default cells (the part for it, in a shared row). */
interface Row {
  flag: string;
  env: string;
  dflt: string;
}

/** The settings table of docs/configuration.md, by key; a row naming several keys gives each its part of every cell. */
async function referenceRows(): Promise<Map<string, Row>> {
  const rows = new Map<string, Row>();
  const lines = (await readFile(PAGE, 'utf8')).split('\n');
  const at = lines.flatMap((line, n) => (line.startsWith('| `') ? [n] : []));
  // One table: a line that is not a row between two rows would end it (the rest shows as text).
  expect(at.at(-1)! - at[0]! + 1, 'the settings table is one run of rows').toBe(at.length);
  for (const line of lines) {
    if (!line.startsWith('| `')) continue;
    const cells = line.split(' | ').map((c) => c.replace(/^\| /, '').trim());
    const keys = (cells[0] as string).split(', ').map((k) => k.replaceAll('`', ''));
    if (!keys.every((k) => /^[a-z_]+$/.test(k))) continue;
    const part = (cell: string | undefined, i: number) => (keys.length > 1 ? (cell?.split(', ')[i] ?? '') : (cell ?? ''));
    keys.forEach((key, i) => {
      expect(rows.has(key), `${key} is listed once`).toBe(false);
      rows.set(key, { flag: part(cells[1], i), env: part(cells[2], i), dflt: part(cells[3], i) });
    });
  }
  return rows;
}

/** A schema default as the reference writes it in backticks. */
function written(key: ConfigKey): string | undefined {
  const value = defaultOf(configShape[key]);
  if (value === undefined || typeof value === 'object') return undefined;
  return flagHelp(configShape[key]).arg === 'DURATION' ? shortDuration(value as number) : String(value);
}

describe('docs/configuration.md, against the schema', () => {
  it('lists every setting once, no other, with its flag and variable', async () => {
    const rows = await referenceRows();
    expect([...rows.keys()].sort()).toEqual([...configKeys].sort());
    for (const key of configKeys) {
      const row = rows.get(key) as Row;
      expect(row.flag, key).toContain(`\`${flagName(key)}\``);
      const env = envName(key);
      // A shared row writes the second variable by its end: `…_MAX`.
      const shortened = row.env.startsWith('`…') && env.endsWith(row.env.replaceAll('`', '').slice(1));
      expect(row.env.includes(`\`${env}\``) || shortened, `${key}: ${row.env} names ${env}`).toBe(true);
    }
  });

  it("gives each setting's default as the schema holds it", async () => {
    const rows = await referenceRows();
    const checked: string[] = [];
    for (const key of configKeys) {
      const value = written(key);
      // A default in words (the host name) is the schema's to compute.
      if (value === undefined || key === 'node_name') continue;
      const shown = /`([^`]*)`/.exec((rows.get(key) as Row).dflt)?.[1];
      expect(shown, `${key}: the reference says ${shown}, the schema ${value}`).toBe(value);
      checked.push(key);
    }
    expect(checked.length).toBeGreaterThan(40);
  });

  it('has help for every flag, its default read from the schema', () => {
    for (const key of configKeys) expect(flagHelp(configShape[key]).help, key).not.toBe('');
    expect(flagHelp(configShape.max_blocking_queries_per_client).help).toContain('(default 150)');
    expect(flagHelp(configShape.http_max_conns_per_client).help).toContain('(default 200)');
    expect(flagHelp(configShape.token_max_ttl).help).toContain('(default 24h)');
    expect(flagHelp(configShape.log_rotate_bytes).help).toContain('(default 67108864, 64 MiB)');
    expect(flagHelp(configShape.data_dir).help).toContain('(default: ./data/<datacenter>)');
    expect(flagHelp(configShape.server_peers).help).not.toContain('default');
  });
});
