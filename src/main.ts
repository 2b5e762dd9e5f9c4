#!/usr/bin/env -S node --max-semi-space-size=32 --heap-growing-percent=50
import { rmSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { ioOfCommand, processIO } from './cli/io.js';
import { runCli } from './cli/program.js';
import { AGENT_HTTP_ADDR_ENV, ConfigError, envName, flagName, loadConfig } from './config/load.js';
import { readConfigFiles } from './config/files.js';
import { type Config, type ConfigKey, configKeys, configShape } from './config/schema.js';
import { flagHelp } from './config/setting-doc.js';
import type { Daemon } from './daemon.js';

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
    const { arg, help } = flagHelp(configShape[key]);
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
