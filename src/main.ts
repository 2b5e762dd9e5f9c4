#!/usr/bin/env -S node --max-semi-space-size=32
import { rmSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { ioOfCommand, processIO } from './cli/io.js';
import { runCli } from './cli/program.js';
import { AGENT_HTTP_ADDR_ENV, ConfigError, envName, flagName, loadConfig } from './config/load.js';
import { readConfigFiles } from './config/files.js';
import { type Config, type ConfigKey, configKeys } from './config/schema.js';
import type { Daemon } from './daemon.js';

const AGENT_FLAGS: Record<ConfigKey, { arg: string; help: string }> = {
  datacenter: { arg: 'NAME', help: 'name of this datacenter (default dc1)' },
  primary_datacenter: { arg: 'NAME', help: 'the primary datacenter (default: this one)' },
  primary_address: { arg: 'URL', help: "HTTP base URL of the primary's daemon (required on a secondary)" },
  replication_token: { arg: 'SECRET', help: 'token with acl:write on the primary, used to replicate (secondary)' },
  replication_backoff_min: {
    arg: 'DURATION',
    help: 'secondary: first wait before reconnecting to the primary (default 250ms; doubles up to the max)',
  },
  replication_backoff_max: { arg: 'DURATION', help: 'secondary: longest wait before reconnecting to the primary (default 2s)' },
  replication_history_interval: { arg: 'DURATION', help: 'how often replication lag is sampled for the web UI chart (default 10s)' },
  replication_max_stale: {
    arg: 'DURATION',
    help: 'secondary: refuse global tokens once the primary has been silent longer than this, e.g. 30s (default 0: never)',
  },
  data_dir: { arg: 'DIR', help: 'data directory (default ./data/<datacenter>)' },
  http_addr: { arg: 'HOST:PORT', help: 'HTTP listen address; port 0 picks a free port (default 127.0.0.1:8500)' },
  advertise_addr: { arg: 'HOST:PORT', help: 'address other datacenters reach this daemon at (default: the bound address)' },
  datacenter_addresses: { arg: 'NAME=URL,…', help: "other datacenters' daemons; preferred over the addresses they report" },
  initial_management_token: { arg: 'SECRET', help: 'create a management token with this secret at start-up (primary)' },
  node_name: { arg: 'NAME', help: 'name of this node (default: host name)' },
  log_level: { arg: 'LEVEL', help: 'trace|debug|info|warn|error|fatal|silent (default info)' },
  log_format: { arg: 'FORMAT', help: 'json|text (default: text on a terminal, JSON otherwise)' },
  log_file: { arg: 'FILE', help: 'also log to FILE (JSON lines), rotated by size' },
  log_rotate_bytes: { arg: 'BYTES', help: 'rotate the log file past this size (default 67108864, 64 MiB)' },
  log_rotate_max_files: { arg: 'N', help: 'rotated log files kept (default 5)' },
  audit_log: { arg: 'BOOL', help: 'write the audit log (default true)' },
  audit_log_path: { arg: 'FILE', help: 'where the audit log goes (default <data-dir>/audit/audit.log)' },
  audit_log_mode: {
    arg: 'MODE',
    help:
      'best-effort (a failing audit write is logged) | enforced (writes refused with 503 when their audit line cannot be written) ' +
      '(default best-effort)',
  },
  audit_log_rotate_bytes: { arg: 'BYTES', help: 'rotate the audit log past this size (default 67108864, 64 MiB)' },
  audit_log_rotate_max_files: { arg: 'N', help: 'rotated audit files kept (default 10)' },
  default_policy: { arg: 'POLICY', help: 'allow|deny when no rule decides (default deny)' },
  down_policy: {
    arg: 'POLICY',
    help: 'extend-cache|async-cache|deny|allow, reported to enforcing clients as AgentACLDownPolicy (default extend-cache)',
  },
  token_min_ttl: { arg: 'DURATION', help: 'shortest token lifetime on create (default 1m)' },
  token_max_ttl: { arg: 'DURATION', help: 'longest token lifetime on create (default 24h)' },
  reap_interval: { arg: 'DURATION', help: 'how often expired tokens are reaped (default 1s)' },
  last_used_flush: { arg: 'DURATION', help: "how often tokens' last uses are written (default 60s)" },
  recent_checks: { arg: 'BOOL', help: 'note the checks asked in the last hour, for dry runs (default true)' },
  login_token_idle_ttl: { arg: 'DURATION', help: 'revoke login tokens unused this long; 0 off (default 72h)' },
  durability: { arg: 'MODE', help: 'fsync (acknowledge after sync) | os (after handing to the OS) (default fsync)' },
  max_blocking_queries: { arg: 'N', help: 'blocking queries held at once in all; past it 429 (default 20000)' },
  max_blocking_queries_per_client: { arg: 'N', help: 'blocking queries held at once per client address; past it 429 (default 2000)' },
  http_request_timeout: {
    arg: 'DURATION',
    help: 'longest a client may take to send a whole request (default 30s; blocking waits do not count)',
  },
  http_header_timeout: { arg: 'DURATION', help: "longest a client may take to send a request's headers (default 10s)" },
  http_keepalive_timeout: { arg: 'DURATION', help: 'idle keep-alive connections close after this (default 5s)' },
  http_max_requests_per_conn: { arg: 'N', help: 'requests per keep-alive connection before it closes; 0 = no limit (default 0)' },
  http_max_conns: { arg: 'N', help: 'open HTTP connections at once; more are dropped (default 20000)' },
  http_max_conns_per_client: {
    arg: 'N',
    help: 'open HTTP connections at once from one client address; more are dropped (default 4096; 0: no cap)',
  },
  http_allowed_hosts: {
    arg: 'HOST,…',
    help: 'Host names (name or name:port) requests may be addressed to; on loopback, loopback names at the port are always allowed',
  },
  rate_limit_peer: { arg: 'N', help: 'requests per second a peer daemon may forward in all (default 10 x rate-limit)' },
  secret_lookup_rate: { arg: 'N', help: 'secondary: look-ups of unknown secrets at the primary per client per second (default 10)' },
  unknown_secret_rate: {
    arg: 'N',
    help: 'secrets no token holds presented per client address per second, at any door; past it 429 (default 20)',
  },
  watch_max_queued_bytes: {
    arg: 'BYTES',
    help: "bytes waiting for one enforcing client's watch past which it is not read (default 1048576, 1 MiB)",
  },
  watch_max_total_bytes: {
    arg: 'BYTES',
    help: 'bytes waiting for every watch together; past it the largest are closed (default 67108864, 64 MiB)',
  },
  watch_max_tokens: { arg: 'N', help: 'tokens every watch together holds; past it the largest are closed (default 2000000)' },
  upgrade_auto_finalize: {
    arg: 'BOOL',
    help: "the primary's leader finalizes an upgrade once every server runs this release (default false)",
  },
  auth_method_allowed_hosts: { arg: 'HOST,…', help: 'hosts (name or name:port) auth methods may fetch from; empty: any' },
  login_rate: { arg: 'N', help: 'logins per second per client address; 0 = no limit (default 10)' },
  login_burst: { arg: 'N', help: 'logins a client may burst above login_rate (default 20)' },
  snapshot_max_bytes: { arg: 'BYTES', help: 'largest snapshot a restore accepts; 413 past it (default 536870912, 512 MiB)' },
  log_retention: { arg: 'N', help: 'change-log entries the primary keeps for secondaries (default 100000)' },
  rate_limit: { arg: 'N', help: 'requests per second per client address; 0 = no limit (default 0)' },
  rate_limit_burst: { arg: 'N', help: 'requests a client may burst above the rate (default: the rate)' },
  server_peers: { arg: 'HOST:PORT,…', help: "this datacenter's servers, this one included; without --coordinator the first leads" },
  coordinator: { arg: 'etcd://HOST:PORT,…', help: 'elect the leader of several servers through etcd (etcds:// over TLS)' },
  etcd_ca_file: { arg: 'FILE', help: "PEM CA that signs etcd's certificate (etcds://)" },
  etcd_cert_file: { arg: 'FILE', help: 'PEM client certificate for etcd' },
  etcd_key_file: { arg: 'FILE', help: 'PEM key of --etcd-cert-file' },
  etcd_username: { arg: 'USER', help: 'etcd user (etcd auth)' },
  etcd_password: { arg: 'PASSWORD', help: 'password of --etcd-username' },
  tls_ca_file: { arg: 'FILE', help: "PEM CA that signs the servers' (and clients') certificates" },
  tls_cert_file: {
    arg: 'FILE',
    help: "this server's PEM certificate (server.<dc>.<domain>); with --tls-key-file the API speaks HTTPS only",
  },
  tls_key_file: { arg: 'FILE', help: 'PEM key of --tls-cert-file' },
  tls_verify_incoming: {
    arg: 'BOOL',
    help: 'every HTTPS client must present a certificate signed by the CA (default false; servers always must)',
  },
  tls_verify_outgoing: { arg: 'BOOL', help: "check peers' certificates against the CA (default true)" },
  tls_verify_server_hostname: { arg: 'BOOL', help: "a peer's certificate must name server.<its dc>.<domain> (default true)" },
  tls_domain: { arg: 'DOMAIN', help: 'domain of server names in certificates (default watchword)' },
  tls_min_version: { arg: 'VERSION', help: 'TLSv1.2|TLSv1.3 (default TLSv1.2)' },
  server_key: { arg: 'BASE64', help: 'several servers without TLS: the shared key they prove themselves with (watchword keygen)' },
  leader_lease: { arg: 'DURATION', help: "the leader's lease in the coordinator, whole seconds (default 5s)" },
  sync_followers: { arg: 'N', help: 'followers that must hold a write before it is acknowledged, when connected (default 1)' },
};

const camel = (key: string): string => key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** The configuration as the agent reads it: `--config` files and `--config-dir` directories (JSON or HCL), environment, flags. */
async function readAgentConfig(
  opts: Record<string, unknown>,
  flags: Partial<Record<ConfigKey, unknown>>,
  origins?: Map<string, string>,
): Promise<Config> {
  const { documents, problems } = await readConfigFiles(
    (opts.config as string[] | undefined) ?? [],
    (opts.configDir as string[] | undefined) ?? [],
  );
  return loadConfig({ documents, fileProblems: problems, env: process.env, flags, ...(origins ? { origins } : {}) });
}

/** `watchword validate FILE… [--config-dir DIR]`: the whole configuration checked, every problem listed. */
function validateCommand(program: Command): void {
  program
    .command('validate')
    .description(
      'check configuration files (JSON or HCL) as the agent would read them, with the built-in defaults; every problem is listed',
    )
    .argument('[FILE...]', 'config files, merged in order')
    .option(
      '--config-dir <DIR>',
      'also every .json and .hcl file in DIR, in name order; repeatable',
      (value: string, previous: string[]) => [...previous, value],
      [],
    )
    .action(async (files: string[], opts: { configDir: string[] }, cmd: Command) => {
      const io = ioOfCommand(cmd);
      if (files.length === 0 && opts.configDir.length === 0) {
        io.err('watchword validate: name at least one config file or --config-dir\n');
        io.setExitCode(2);
        return;
      }
      try {
        const { documents, problems } = await readConfigFiles(files, opts.configDir);
        loadConfig({ documents, fileProblems: problems });
        io.out('Configuration is valid!\n');
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        io.err(`${err.message}\n`);
        io.setExitCode(1);
      }
    });
}

function agentCommand(program: Command): void {
  const cmd = program.command('agent').description('run the watchword daemon for one datacenter');
  cmd.option(
    '--config <FILE>',
    'config file, JSON or HCL (by extension); repeatable, later files win',
    (value: string, previous: string[]) => [...previous, value],
    [],
  );
  cmd.option(
    '--config-dir <DIR>',
    'every .json and .hcl file in DIR, in name order, after the --config files; repeatable',
    (value: string, previous: string[]) => [...previous, value],
    [],
  );
  for (const key of configKeys) {
    const { arg, help } = AGENT_FLAGS[key];
    // Booleans may be given bare (--tls-verify-incoming) or with a value (--tls-verify-incoming false).
    const value = arg === 'BOOL' ? `[${arg}]` : `<${arg}>`;
    const env = key === 'http_addr' ? `${AGENT_HTTP_ADDR_ENV}, then ${envName(key)}` : envName(key);
    cmd.addOption(new Option(`${flagName(key)} ${value}`, `${help} [env ${env}]`));
  }
  cmd.action(runAgent);
}

async function runAgent(opts: Record<string, unknown>): Promise<void> {
  const flags: Partial<Record<ConfigKey, unknown>> = {};
  for (const key of configKeys) if (opts[camel(key)] !== undefined) flags[key] = opts[camel(key)];
  let config: Config;
  const origins = new Map<string, string>();
  try {
    config = await readAgentConfig(opts, flags, origins);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`watchword: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const life = new AgentLife(() => readAgentConfig(opts, flags));
  life.watchSignals();
  life.watchNpmParent();
  // Logs whose reader has gone (a closed pipe: EPIPE) are dropped; the daemon keeps serving. Without a
  // listener the stream's error would end the process before any stop below could run.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
  const lifeline = process.env.WATCHWORD_LIFELINE === 'stdin' ? new HarnessLifeline(config.data_dir) : undefined;
  let daemon: Daemon;
  try {
    // The daemon (Fastify, LevelDB, …) loads only for `agent`: client commands start in a fraction of the time.
    const { startDaemon } = await import('./daemon.js');
    daemon = await startDaemon(config, { notices: startNotices(config, origins) });
  } catch (err) {
    process.stderr.write(`watchword: cannot start: ${(err as Error).message}\n`);
    process.exit(1);
  }
  life.started(daemon);
  lifeline?.hold(life);
}

/** What the agent's first log lines say of how it was configured. */
function startNotices(config: Config, origins: Map<string, string>): string[] {
  if (origins.get('http_addr') !== `env ${envName('http_addr')}`) return [];
  return [
    `listening on ${config.http_addr}, the address ${envName('http_addr')} names; the CLI reads that variable too, to find a ` +
      `daemon (${AGENT_HTTP_ADDR_ENV} sets the agent's alone)`,
  ];
}

/** How the agent's process stops and reloads: signals, the npm parent, the harness's lifeline. */
class AgentLife {
  private daemon: Daemon | undefined;
  private stopping = false;
  /** A signal during start-up is kept and acted on once the daemon is up (the port is announced before start ends). */
  private stopWhenStarted = false;

  constructor(private readonly readConfig: () => Promise<Config>) {}

  /** Installed before start-up, so a SIGTERM at any moment is a clean stop, never the default kill. */
  watchSignals(): void {
    process.on('SIGINT', () => this.stop('SIGINT'));
    process.on('SIGTERM', () => this.stop('SIGTERM'));
    // SIGHUP reads the configuration again (files, environment, the same flags) and applies what
    // may change: TLS files, log level, limits, audit settings (the default action would end the daemon).
    process.on('SIGHUP', () => {
      const d = this.daemon;
      if (!d) return;
      this.readConfig().then(
        (next) => d.reload(next),
        (err: unknown) => {
          process.stderr.write(`watchword: reload refused, the configuration in force stays: ${(err as Error).message}\n`);
          d.reload();
        },
      );
    });
  }

  /**
   * Run by npm (npm start, npx watchword agent), a shell may stand between npm and this process and
   * die of the SIGTERM a supervisor sent npm without passing it on: this process is then re-parented,
   * and takes that as the signal. (A daemon started otherwise is left alone when its parent exits;
   * a harness's daemon has its lifeline instead.)
   */
  watchNpmParent(): void {
    if (process.env.npm_command === undefined || process.env.WATCHWORD_LIFELINE !== undefined || process.ppid === 1) return;
    const parent = process.ppid;
    const watch = setInterval(() => {
      if (process.ppid === parent) return;
      clearInterval(watch);
      this.stop('its npm parent exited');
    }, 250);
    watch.unref();
  }

  started(daemon: Daemon): void {
    this.daemon = daemon;
    if (this.stopWhenStarted) this.close(daemon);
  }

  /** Stops at once, without a second signal's hurry (the harness has gone). */
  end(): void {
    if (this.stopping || !this.daemon) return;
    this.stopping = true;
    this.daemon.close().finally(() => process.exit(0));
  }

  private stop(signal: string): void {
    if (this.stopping) {
      process.stderr.write(`watchword: ${signal} again, exiting now\n`);
      process.exit(1);
    }
    this.stopping = true;
    if (this.daemon) this.close(this.daemon);
    else this.stopWhenStarted = true;
  }

  private close(d: Daemon): void {
    d.close().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`watchword: error while stopping: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  }
}

/**
 * Started by a test harness (watchword/testing): live only as long as the process that started
 * us, and then take the temporary data dir with us. Checked as the process exits, whatever ends
 * it, so that no race between the closing pipes decides whether the dir is left behind.
 */
class HarnessLifeline {
  private cut = false;
  private readonly harness = process.ppid;

  constructor(dataDir: string) {
    if (process.env.WATCHWORD_LIFELINE_REMOVE_DATA !== '1') return;
    process.once('exit', () => {
      if (!this.cut && process.ppid === this.harness) return;
      try {
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
      } catch {
        // Nothing more to do on the way out.
      }
    });
  }

  /** The harness's end of our stdin closes when it exits, even by SIGKILL. */
  hold(life: AgentLife): void {
    process.stdin.on('error', () => undefined);
    process.stdin.once('close', () => {
      this.cut = true;
      life.end();
    });
    process.stdin.resume();
  }
}

process.exitCode = await runCli(process.argv.slice(2), processIO, (program) => {
  agentCommand(program);
  validateCommand(program);
});
