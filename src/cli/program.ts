import { Command, CommanderError } from 'commander';
import { PREVIOUS_RELEASE, VERSION, releaseInfo } from '../version.js';
import { aclCommand } from './acl.js';
import { normalizeArgv } from './argv.js';
import { HTTP_API_FLAGS } from './common.js';
import { consulHelp } from './help.js';
import { loginCommands } from './auth.js';
import { type CliIO, attachIO } from './io.js';
import { operatorCommand } from './operator.js';
import { auditCommand } from './audit.js';
import { snapshotCommand } from './snapshot.js';
import { tlsCommands } from './tls.js';

/**
 * The `watchword` command tree, writing through `io`. `extra` adds commands that need the
 * process itself (the agent: signals, stdin), which main.ts registers.
 */
export function buildProgram(io: CliIO, extra?: (program: Command) => void): Command {
  const program = new Command('watchword')
    .description('ACL token and role service: one daemon per datacenter')
    .version(VERSION, '-v, --version')
    // Usage errors exit 2 (API errors exit 1); set before subcommands so they inherit it.
    .exitOverride()
    // Flags are spelled with one dash, as in Consul's CLI (two are accepted too).
    // Commander's own errors read as every other error of the CLI: `Error: …`, flags with one dash.
    .configureOutput({
      writeOut: (s) => io.out(s),
      writeErr: (s) => io.err(s.replace(/^error: /, 'Error: ').replace(/'--([a-z])/g, "'-$1")),
    })
    .configureHelp({ formatHelp: (cmd, helper) => consulHelp(cmd, helper, HTTP_API_FLAGS) })
    .showHelpAfterError('(add -help for usage)')
    // A command's flags are read where they stand: `operator primary promote -http-addr X` gives them to promote, not to
    // `operator primary`, which has the same flags (inherited by every subcommand).
    .enablePositionalOptions();
  attachIO(program, io);
  program
    .command('version')
    .description('print the version of this build')
    .action(() => {
      const r = releaseInfo();
      const range = ([lo, hi]: [number, number]) => (lo === hi ? `${lo}` : `${lo}-${hi}`);
      io.out(
        `watchword v${VERSION}\n` +
          `Protocols: replication ${range(r.Protocols.Replication)}, servers ${range(r.Protocols.Servers)}, watch ${range(r.Protocols.Watch)}\n` +
          `Store formats: ${range(r.StoreFormats)}\n` +
          `Previous release: v${PREVIOUS_RELEASE.version} (${PREVIOUS_RELEASE.commit.slice(0, 12)})\n` +
          `Node.js ${process.version}\n`,
      );
    });
  extra?.(program);
  aclCommand(program);
  snapshotCommand(program);
  operatorCommand(program);
  auditCommand(program);
  loginCommands(program);
  tlsCommands(program);
  return program;
}

/** Every long flag name in the command tree, so `-flag` can be read as `--flag`. */
function longFlags(cmd: Command, into = new Set<string>()): Set<string> {
  for (const o of cmd.options) if (o.long) into.add(o.long.replace(/^--/, ''));
  for (const sub of cmd.commands) longFlags(sub, into);
  into.add('help');
  return into;
}

/** Runs one command line (without the executable's name); resolves with its exit code. */
export async function runCli(argv: readonly string[], io: CliIO, extra?: (program: Command) => void): Promise<number> {
  let code = 0;
  const program = buildProgram(
    {
      ...io,
      setExitCode: (c) => {
        code = c;
        io.setExitCode(c);
      },
    },
    extra,
  );
  try {
    await program.parseAsync(normalizeArgv(argv, longFlags(program)), { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    code = err.exitCode === 0 ? 0 : 2;
  }
  return code;
}
