import { readFileSync, readdirSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';

/**
 * Configuration files, JSON or HCL by extension (`.json`, `.hcl`), as Consul reads its own:
 * several `--config` files and every file of each `--config-dir`, merged in order (later
 * wins). HCL is parsed with HashiCorp's own parser (the `hcl` Go package compiled to
 * WebAssembly, @cdktf/hcl2json), not a grammar of ours. Sections are flattened to settings:
 * `tls { ca_file = … }` is `tls_ca_file`, `etcd { … }` likewise, and Consul's
 * `acl { default_policy, down_policy, tokens { initial_management, replication } }` maps to
 * the settings watchword has.
 */

/**
 * HashiCorp's HCL parser, loaded when a `.hcl` file is read. Imported by a name TypeScript does
 * not resolve: the package's declarations pull in the DOM library, whose Headers and fetch types
 * would replace Node's for the whole project.
 */
const HCL_PACKAGE = '@cdktf/hcl2json';
async function hclParser(): Promise<(file: string, text: string) => Promise<unknown>> {
  const mod = (await import(HCL_PACKAGE)) as { parse: (file: string, text: string) => Promise<unknown> };
  return mod.parse;
}

/** One file's settings, flattened, and where they came from. */
export interface ConfigDocument {
  source: string;
  values: Record<string, unknown>;
}

/** What could be read: the documents, in order, and every problem found. */
export interface ConfigFiles {
  documents: ConfigDocument[];
  problems: string[];
}

/** Consul's acl stanza, by the settings watchword has. */
const ACL_KEYS: Record<string, string> = { default_policy: 'default_policy', down_policy: 'down_policy' };
const ACL_TOKENS: Record<string, string> = {
  initial_management: 'initial_management_token',
  master: 'initial_management_token',
  replication: 'replication_token',
};

/** HCL gives every block as a list of bodies; a section written once is its one body. */
function section(value: unknown, name: string, problems: string[], source: string): Record<string, unknown> | undefined {
  const body = Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    problems.push(`${source}: ${name} must be one block of settings`);
    return undefined;
  }
  return body as Record<string, unknown>;
}

/** A parsed file's settings, sections flattened. */
export function flatten(parsed: Record<string, unknown>, source: string, problems: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(parsed)) {
    if (k === 'tls' || k === 'etcd') {
      const body = section(v, k, problems, source);
      for (const [inner, value] of Object.entries(body ?? {})) out[`${k}_${inner}`] = value;
      continue;
    }
    if (k === 'acl') {
      const body = section(v, k, problems, source) ?? {};
      for (const [inner, value] of Object.entries(body)) {
        if (inner === 'enabled') {
          if (value !== true && value !== 'true')
            problems.push(`${source}: acl.enabled: ACLs are always enforced by watchword; it cannot be false`);
        } else if (inner === 'tokens') {
          const tokens = section(value, 'acl.tokens', problems, source) ?? {};
          for (const [t, secret] of Object.entries(tokens)) {
            const key = ACL_TOKENS[t];
            if (key) out[key] = secret;
            else problems.push(`${source}: acl.tokens.${t}: not a token watchword uses (it has initial_management and replication)`);
          }
        } else if (ACL_KEYS[inner]) {
          out[ACL_KEYS[inner] as string] = value;
        } else {
          problems.push(`${source}: acl.${inner}: not a setting of watchword (it has default_policy, down_policy, enabled and tokens)`);
        }
      }
      continue;
    }
    out[k] = v;
  }
  return out;
}

/** The files of a config directory, `.json` and `.hcl`, in name order. */
function filesIn(dir: string, problems: string[]): string[] {
  try {
    return readdirSync(dir)
      .filter((f) => ['.json', '.hcl'].includes(extname(f)))
      .sort()
      .map((f) => join(dir, f))
      .filter((f) => statSync(f).isFile());
  } catch (err) {
    problems.push(`${dir}: cannot read config directory: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    return [];
  }
}

/** Reads every file (`--config` files first, then each `--config-dir`), parsing HCL with HashiCorp's parser. */
export async function readConfigFiles(files: readonly string[], dirs: readonly string[] = []): Promise<ConfigFiles> {
  const problems: string[] = [];
  const documents: ConfigDocument[] = [];
  const all = [...files, ...dirs.flatMap((d) => filesIn(d, problems))];
  for (const file of all) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      problems.push(`${file}: cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      continue;
    }
    let parsed: unknown;
    const hcl = extname(file) === '.hcl';
    try {
      if (hcl) {
        parsed = await (await hclParser())(file, text);
      } else {
        parsed = JSON.parse(text);
      }
    } catch (err) {
      const message = (err as Error).message.replace(/^parse config: \[(.*)\]$/s, '$1');
      problems.push(hcl ? `${file}: not valid HCL: ${message}` : `${file}: not valid JSON: ${message}`);
      continue;
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      problems.push(`${file}: a config file must hold settings (an object)`);
      continue;
    }
    documents.push({ source: file, values: flatten(parsed as Record<string, unknown>, file, problems) });
  }
  return { documents, problems };
}
