import { readFileSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { WatchwordApiError, WatchwordClient } from '../client/index.js';
import { type CliIO, bindIO, ioOf, ioOfCommand } from './io.js';

/** What every client command shares: the CLI's plumbing. */

/** A mistake in how the command was called: exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** What the command was asked to act on is not there, or not one thing (exit 1, as Consul's CLI: not a usage error). */
export class LookupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LookupError';
  }
}

export interface CommonOptions {
  httpAddr?: string;
  token?: string;
  tokenFile?: string;
  namespace?: string;
  partition?: string;
  datacenter?: string;
  caFile?: string;
  clientCert?: string;
  clientKey?: string;
  tlsServerName?: string;
  stale?: boolean;
  format: 'pretty' | 'table' | 'json';
}

/** `-meta`, on the commands that print ACL objects: their Hash and indices too. */
export interface MetaOption {
  meta?: boolean;
}

/** Whether an invocation asked for `-meta` (login's -meta is key=value pairs, not this). */
export const showMeta = (o: object): boolean => (o as MetaOption).meta === true;

/** The flags every command that talks to a daemon takes: Consul's "HTTP API Options". */
export const HTTP_API_FLAGS = new Set([
  'http-addr',
  'token',
  'token-file',
  'namespace',
  'partition',
  'datacenter',
  'ca-file',
  'client-cert',
  'client-key',
  'tls-server-name',
  'stale',
  'format',
]);

export function common(cmd: Command): Command {
  return cmd
    .option(
      '--http-addr <ADDR>',
      'address of the watchword daemon; also WATCHWORD_HTTP_ADDR, then CONSUL_HTTP_ADDR (default 127.0.0.1:8500)',
    )
    .option(
      '--token <SECRET>',
      'ACL token to use; also WATCHWORD_HTTP_TOKEN, then CONSUL_HTTP_TOKEN. Prefer -token-file: a secret on the command line shows in ' +
        'ps and in shell history',
    )
    .option('--token-file <FILE>', 'file holding the ACL token to use; also WATCHWORD_HTTP_TOKEN_FILE, then CONSUL_HTTP_TOKEN_FILE')
    .option('--namespace <NAME>', 'namespace of the request')
    .option('--partition <NAME>', 'admin partition of the request')
    .option('--datacenter <NAME>', 'send the request to this datacenter')
    .option(
      '--ca-file <FILE>',
      "PEM CA that signs the daemon's certificate, for https:// addresses; also WATCHWORD_CACERT, then CONSUL_CACERT",
    )
    .option(
      '--client-cert <FILE>',
      'PEM client certificate, when the daemon verifies clients; also WATCHWORD_CLIENT_CERT, then CONSUL_CLIENT_CERT',
    )
    .option('--client-key <FILE>', 'PEM key of -client-cert; also WATCHWORD_CLIENT_KEY, then CONSUL_CLIENT_KEY')
    .option(
      '--tls-server-name <NAME>',
      "the name to verify the daemon's certificate for, when it differs from the address (such as server.dc1.watchword); also " +
        'WATCHWORD_TLS_SERVER_NAME, then CONSUL_TLS_SERVER_NAME',
    )
    .option('--stale', 'let any server answer a read, not only the leader (faster; may be slightly behind)')
    .addOption(
      new Option('--format <FORMAT>', 'output: pretty (key/value blocks and tables) or json (the API JSON)')
        .choices(['pretty', 'table', 'json'])
        .default('pretty'),
    );
}

/** `-meta` on the commands that print ACL objects: their Hash and indices too. */
export function meta(cmd: Command): Command {
  return cmd.option('--meta', 'also show the content hash and the create and modify indices');
}

/** The first of the named variables that is set, with its name. */
function fromEnv(env: CliIO['env'], ...names: string[]): { name: string; value: string } | undefined {
  for (const name of names) {
    const value = env[name];
    if (value) return { name, value };
  }
  return undefined;
}

/** A token kept in a file (as Consul's -token-file): its first line, trimmed; an empty file is a mistake. */
function tokenFromFile(path: string, from: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read the token file ${path} (${from}): ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const token = text.trim();
  if (token === '') throw new UsageError(`the token file ${path} (${from}) is empty`);
  return token;
}

/**
 * The token a command sends: -token, -token-file, then the environment: WATCHWORD_HTTP_TOKEN,
 * WATCHWORD_HTTP_TOKEN_FILE, CONSUL_HTTP_TOKEN, CONSUL_HTTP_TOKEN_FILE (so that scripts written
 * for Consul run as they are).
 */
export function tokenOf(o: CommonOptions, env: CliIO['env']): string | undefined {
  if (o.token) return o.token;
  if (o.tokenFile) return tokenFromFile(o.tokenFile, '-token-file');
  for (const [plain, file] of [
    ['WATCHWORD_HTTP_TOKEN', 'WATCHWORD_HTTP_TOKEN_FILE'],
    ['CONSUL_HTTP_TOKEN', 'CONSUL_HTTP_TOKEN_FILE'],
  ] as const) {
    if (env[plain]) return env[plain];
    if (env[file]) return tokenFromFile(env[file] as string, file);
  }
  return undefined;
}

/** The client a command talks through: flags first, then the command's environment (never another's). */
export function clientFor(o: CommonOptions, env: CliIO['env'] = ioOf(o).env): WatchwordClient {
  const address = o.httpAddr || fromEnv(env, 'WATCHWORD_HTTP_ADDR', 'CONSUL_HTTP_ADDR')?.value || 'http://127.0.0.1:8500';
  const token = tokenOf(o, env);
  const caFile = o.caFile || fromEnv(env, 'WATCHWORD_CACERT', 'CONSUL_CACERT')?.value;
  const certFile = o.clientCert || fromEnv(env, 'WATCHWORD_CLIENT_CERT', 'CONSUL_CLIENT_CERT')?.value;
  const keyFile = o.clientKey || fromEnv(env, 'WATCHWORD_CLIENT_KEY', 'CONSUL_CLIENT_KEY')?.value;
  const serverName = o.tlsServerName || fromEnv(env, 'WATCHWORD_TLS_SERVER_NAME', 'CONSUL_TLS_SERVER_NAME')?.value;
  return new WatchwordClient({
    address,
    // No token given anywhere: anonymous (the library's own environment lookup is not used).
    token: token ?? null,
    ...(o.namespace ? { namespace: o.namespace } : {}),
    ...(o.partition ? { partition: o.partition } : {}),
    ...(o.datacenter ? { datacenter: o.datacenter } : {}),
    ...(o.stale ? { consistency: 'stale' as const } : {}),
    tls: {
      ...(caFile ? { caFile } : {}),
      ...(certFile ? { certFile } : {}),
      ...(keyFile ? { keyFile } : {}),
      ...(serverName ? { serverName } : {}),
    },
  });
}

/** At most `limit` items of a paged list (every one without it), fetched a page of at most 1,000 at a time. */
export async function upTo<T>(limit: string | undefined, iterate: (perPage: number) => AsyncGenerator<T>): Promise<T[]> {
  const n = limit === undefined ? Number.POSITIVE_INFINITY : /^[0-9]+$/.test(limit) ? Number(limit) : Number.NaN;
  if (!(n >= 1)) throw new UsageError('-limit: expected a whole number of at least 1');
  const out: T[] = [];
  for await (const item of iterate(Math.min(1000, n))) {
    out.push(item);
    if (out.length >= n) break;
  }
  return out;
}

/** Prints a value: the API's JSON with -format json, else `human` (given -meta where the command has it). */
export function print<T>(o: CommonOptions, value: T, human: (v: T, meta: boolean) => string): void {
  ioOf(o).out(`${o.format === 'json' ? JSON.stringify(value, null, 4) : human(value, showMeta(o))}\n`);
}

/**
 * Wraps an action: API errors exit 1 with the server's message, usage errors exit 2.
 * Commander passes the command last; its program's IO is bound to the options, where
 * `print` and the action find it.
 */
export function run<O extends CommonOptions>(action: (o: O, client: WatchwordClient) => Promise<void>) {
  return async (o: O, cmd?: Command) => {
    const io = ioOfCommand(cmd);
    bindIO(o, io);
    try {
      await action(o, clientFor(o, io.env));
    } catch (err) {
      if (err instanceof UsageError) {
        io.err(`Error: ${err.message}\n`);
        io.setExitCode(2);
      } else if (err instanceof LookupError) {
        io.err(`Error: ${err.message}\n`);
        io.setExitCode(1);
      } else if (err instanceof WatchwordApiError) {
        io.err(`Error: ${err.message} (HTTP ${err.status} ${err.code})\n`);
        io.setExitCode(1);
      } else {
        const e = err as Error & { cause?: { code?: string; message?: string } };
        const code = e.cause?.code ?? '';
        const untrusted = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(code);
        const why = untrusted
          ? `the daemon's certificate is not trusted (${code}): give the CA that signed it with -ca-file or WATCHWORD_CACERT`
          : code || e.cause?.message || e.message;
        let address = o.httpAddr ?? '';
        try {
          address = clientFor(o, io.env).address;
        } catch {
          // the address is what the flags say
        }
        io.err(`Error: cannot talk to watchword at ${address}: ${why}\n`);
        io.setExitCode(1);
      }
    }
  };
}
