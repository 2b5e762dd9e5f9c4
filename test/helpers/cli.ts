import { runCli } from '../../src/cli/program.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a `watchword` command line in this process, its output and environment its own (no address or token from this one's). */
export async function runWatchword(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, {
    out: (t) => void (stdout += t),
    err: (t) => void (stderr += t),
    env: { WATCHWORD_HTTP_ADDR: '', WATCHWORD_HTTP_TOKEN: '', ...env },
    setExitCode: () => undefined,
  });
  return { code, stdout, stderr };
}
