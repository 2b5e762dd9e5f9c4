import { open } from 'node:fs/promises';
import type { Command } from 'commander';

/**
 * Where a CLI command writes and what environment it reads: the process's, or (in tests
 * and embedders) anything else, so that commands run in-process with their output captured.
 */
export interface CliIO {
  out(text: string): void;
  err(text: string): void;
  /** The environment the command sees (WATCHWORD_HTTP_ADDR, WATCHWORD_HTTP_TOKEN, …). */
  env: Readonly<Record<string, string | undefined>>;
  /** The command's exit code (0 unless set). */
  setExitCode(code: number): void;
  /** Everything on standard input (`-rules -`); absent where there is none. */
  readStdin?(): Promise<string>;
}

export const processIO: CliIO = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  env: process.env,
  setExitCode: (code) => {
    process.exitCode = code;
  },
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  },
};

const ios = new WeakMap<Command, CliIO>();
const IO = Symbol('cli io');

/** Gives a program (and every command under it) its IO. */
export function attachIO(program: Command, io: CliIO): void {
  ios.set(program, io);
}

/** The IO of the program a command belongs to. */
export function ioOfCommand(cmd: Command | undefined): CliIO {
  for (let c: Command | null | undefined = cmd; c; c = c.parent) {
    const io = ios.get(c);
    if (io) return io;
  }
  return processIO;
}

/** Ties an invocation's parsed options to its IO (commands print through their options). */
export function bindIO<O extends object>(opts: O, io: CliIO): O {
  Object.defineProperty(opts, IO, { value: io, enumerable: false, configurable: true });
  return opts;
}

/** The IO an invocation's options were bound to. */
export function ioOf(opts: object): CliIO {
  return (opts as { [IO]?: CliIO })[IO] ?? processIO;
}

/**
 * Writes a file that holds a secret (a snapshot, a token, a private key): created with mode
 * 0600, and an existing file is made 0600 before the secret is written into it, whatever mode
 * it had (`writeFile`'s mode applies only to a file it creates).
 */
export async function writeSecretFile(path: string, data: string | Uint8Array): Promise<void> {
  const file = await open(path, 'w', 0o600);
  try {
    await file.chmod(0o600);
    await file.writeFile(data);
    await file.sync();
  } finally {
    await file.close();
  }
}
