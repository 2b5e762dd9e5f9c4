import { readFileSync } from 'node:fs';
import type { z } from 'zod';
import { type ConfigDocument, flatten } from './files.js';
import { type Config, type ConfigKey, configKeys, configSchema } from './schema.js';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

export const flagName = (key: ConfigKey): string => `--${key.replaceAll('_', '-')}`;
export const envName = (key: ConfigKey): string => `WATCHWORD_${key.toUpperCase()}`;

/**
 * The agent's own listen address, read before WATCHWORD_HTTP_ADDR: that one is also where the
 * CLI and the client find a daemon (as CONSUL_HTTP_ADDR is Consul's clients'), so a shell that
 * points its commands at one daemon need not move the next agent it starts.
 */
export const AGENT_HTTP_ADDR_ENV = 'WATCHWORD_AGENT_HTTP_ADDR';

export interface ConfigSources {
  /** Paths of JSON config files, later ones win (HCL files are read first, by readConfigFiles). */
  files?: string[];
  /** Config files already read (JSON or HCL, readConfigFiles), later ones win; before `files`. */
  documents?: ConfigDocument[];
  /** Problems found reading `documents`, reported with the rest. */
  fileProblems?: string[];
  /** Environment (process.env). */
  env?: Record<string, string | undefined>;
  /** Values from command-line flags, keyed by config key. */
  flags?: Partial<Record<ConfigKey, unknown>>;
  /** Filled, when given, with where each setting that is not a default came from (`env WATCHWORD_HTTP_ADDR`, a file, a flag). */
  origins?: Map<string, string>;
}

/**
 * Builds the agent configuration: built-in defaults < config files < environment <
 * flags, validated once. Every problem is reported, each naming its key and source.
 */
export function loadConfig(sources: ConfigSources): Config {
  const merged: Record<string, unknown> = {};
  const origin = new Map<string, string>();
  const problems: string[] = [];

  problems.push(...(sources.fileProblems ?? []));
  const documents: ConfigDocument[] = [...(sources.documents ?? [])];
  for (const file of sources.files ?? []) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      problems.push(`${file}: cannot read JSON config: ${(err as Error).message}`);
      continue;
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      problems.push(`${file}: a config file must hold a JSON object`);
      continue;
    }
    documents.push({ source: file, values: flatten(parsed as Record<string, unknown>, file, problems) });
  }
  for (const doc of documents) {
    for (const [k, v] of Object.entries(doc.values)) {
      merged[k] = v;
      origin.set(k, doc.source);
    }
  }
  for (const k of configKeys) {
    const name = k === 'http_addr' && sources.env?.[AGENT_HTTP_ADDR_ENV] ? AGENT_HTTP_ADDR_ENV : envName(k);
    const v = sources.env?.[name];
    if (v !== undefined && v !== '') {
      merged[k] = v;
      origin.set(k, `env ${name}`);
    }
  }
  for (const [k, v] of Object.entries(sources.flags ?? {})) {
    if (v === undefined) continue;
    merged[k] = v;
    origin.set(k, `flag ${flagName(k as ConfigKey)}`);
  }

  for (const [k, v] of origin) sources.origins?.set(k, v);
  const result = configSchema.safeParse(merged);
  if (!result.success) problems.push(...describeIssues(result.error, origin));
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(result.data as Config);
}

function describeIssues(error: z.ZodError, origin: Map<string, string>): string[] {
  return error.issues.map((issue) => {
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((k) => `${k}: unknown setting (from ${origin.get(k) ?? 'config'})`).join('\n  - ');
    }
    const key = String(issue.path[0] ?? '');
    const from = origin.get(key);
    return `${key}: ${issue.message}${from ? ` (from ${from})` : ''}`;
  });
}
