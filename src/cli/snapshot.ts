import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { SnapshotError, readSnapshot } from '../store/snapshot.js';
import { type CommonOptions, UsageError, common, print, run } from './common.js';
import { ioOf, ioOfCommand, writeSecretFile } from './io.js';

async function readFileOrUsage(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new UsageError(`${file}: ${(err as Error).message}`);
  }
}

/** `watchword snapshot save|restore|inspect`, shaped like `consul snapshot`. */
export function snapshotCommand(program: Command): void {
  const snapshot = program.command('snapshot').description('save, restore and inspect snapshots of a datacenter (like `consul snapshot`)');

  common(snapshot.command('save').description("save a snapshot of the datacenter's state to FILE").argument('<FILE>')).action(
    async (file: string, o: CommonOptions, cmd: Command) =>
      run<CommonOptions>(async (opts, c) => {
        const bytes = await c.snapshot.save();
        const { header } = readSnapshot(bytes);
        await writeSecretFile(file, bytes);
        ioOf(opts).out(`Saved and verified snapshot to index ${header.Index}\n`);
      })(o, cmd),
  );

  common(snapshot.command('restore').description('restore the snapshot in FILE').argument('<FILE>')).action(
    async (file: string, o: CommonOptions, cmd: Command) =>
      run<CommonOptions>(async (opts, c) => {
        const result = await c.snapshot.restore(await readFileOrUsage(file));
        print(
          opts,
          result,
          (r) =>
            `Restored snapshot (${r.Restored}) at index ${r.Index}: ${r.Tokens} tokens, ${r.Policies} policies, ${r.Roles} ` +
            `roles\n${r.Message}`,
        );
      })(o, cmd),
  );

  snapshot
    .command('inspect')
    .description('show what a snapshot file holds (no secrets, no daemon needed)')
    .argument('<FILE>')
    .option('--format <FORMAT>', 'pretty or json', 'pretty')
    .action(async (file: string, o: { format: string }, cmd: Command) => {
      const io = ioOfCommand(cmd);
      try {
        const { header } = readSnapshot(await readFileOrUsage(file));
        if (o.format === 'json') {
          io.out(`${JSON.stringify(header, null, 4)}\n`);
          return;
        }
        const rows: Array<[string, string | number]> = [
          ['Datacenter', `${header.Datacenter}${header.Primary ? ' (primary)' : ''}`],
          ['Index', header.Index],
          ['Log ID', header.LogID],
          ['Created', header.CreatedAt],
          ['Format', header.FormatVersion],
          ['Tokens', header.Counts.Tokens ?? 0],
          ['  of them Local', header.Counts.LocalTokens],
          ['Policies', header.Counts.Policies ?? 0],
          ['Roles', header.Counts.Roles ?? 0],
        ];
        const width = Math.max(...rows.map(([k]) => k.length));
        io.out(`${rows.map(([k, v]) => `${`${k}:`.padEnd(width + 2)}${v}`).join('\n')}\n`);
      } catch (err) {
        io.err(`Error: ${err instanceof SnapshotError ? `invalid snapshot: ${err.message}` : (err as Error).message}\n`);
        io.setExitCode(err instanceof UsageError ? 2 : 1);
      }
    });
}
