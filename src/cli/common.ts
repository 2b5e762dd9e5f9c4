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

export interface CommonOptions {
  httpAddr?: string;
  token?: string;
  namespace?: string;
  partition?: string;
  datacenter?: string;
  caFile?: string;
  clientCert?: string;
  clientKey?: string;
  format: 'pretty' | 'table' | 'json';
}

export function common(cmd: Command): Command {
  return cmd
    .option('--http-addr <ADDR>', 'address of the watchword daemon (env WATCHWORD_HTTP_ADDR; default 127.0.0.1:8500)')
    .option('--token <SECRET>', 'ACL token to authenticate with (env WATCHWORD_HTTP_TOKEN)')
    .option('--namespace <NAME>', 'namespace of the request')
    .option('--partition <NAME>', 'admin partition of the request')
    .option('--datacenter <NAME>', 'send the request to this datacenter')
    .option('--ca-file <FILE>', "PEM CA that signs the daemon's certificate, for https:// addresses (env WATCHWORD_CACERT)")
    .option('--client-cert <FILE>', 'PEM client certificate, when the daemon verifies clients (env WATCHWORD_CLIENT_CERT)')
    .option('--client-key <FILE>', 'PEM key of --client-cert (env WATCHWORD_CLIENT_KEY)')
    .addOption(new Option('--format <FORMAT>', 'output: pretty (key/value blocks and tables) or json (the API JSON)').choices(['pretty', 'table', 'json']).default('pretty'));
}

/** The client a command talks through: flags first, then the command's environment (never another's). */
export function clientFor(o: CommonOptions, env: CliIO['env'] = ioOf(o).env): WatchwordClient {
  const address = o.httpAddr || env.WATCHWORD_HTTP_ADDR || 'http://127.0.0.1:8500';
  const token = o.token || env.WATCHWORD_HTTP_TOKEN;
  const caFile = o.caFile || env.WATCHWORD_CACERT;
  const certFile = o.clientCert || env.WATCHWORD_CLIENT_CERT;
  const keyFile = o.clientKey || env.WATCHWORD_CLIENT_KEY;
  return new WatchwordClient({
    address,
    ...(token ? { token } : {}),
    ...(o.namespace ? { namespace: o.namespace } : {}),
    ...(o.partition ? { partition: o.partition } : {}),
    ...(o.datacenter ? { datacenter: o.datacenter } : {}),
    tls: { ...(caFile ? { caFile } : {}), ...(certFile ? { certFile } : {}), ...(keyFile ? { keyFile } : {}) },
  });
}

export function print<T>(o: CommonOptions, value: T, human: (v: T) => string): void {
  ioOf(o).out(`${o.format === 'json' ? JSON.stringify(value, null, 4) : human(value)}\n`);
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
      } else if (err instanceof WatchwordApiError) {
        io.err(`Error: ${err.message} (HTTP ${err.status} ${err.code})\n`);
        io.setExitCode(1);
      } else {
        const e = err as Error & { cause?: { code?: string; message?: string } };
        const code = e.cause?.code ?? '';
        const untrusted = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(code);
        const why = untrusted ? `the daemon's certificate is not trusted (${code}): give the CA that signed it with -ca-file or WATCHWORD_CACERT` : code || e.cause?.message || e.message;
        io.err(`Error: cannot talk to watchword at ${clientFor(o, io.env).address}: ${why}\n`);
        io.setExitCode(1);
      }
    }
  };
}

