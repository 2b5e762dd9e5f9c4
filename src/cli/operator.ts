import type { Command } from 'commander';
import type { OperatorPrimaryResponse, OperatorServersResponse } from '../client/index.js';
import { type CommonOptions, common, print, run } from './common.js';
import { table } from './output.js';

export function formatServers(v: OperatorServersResponse): string {
  const rows = v.Servers.map((s) => [
    s.Name,
    s.Address,
    s.Role,
    s.Registered ? 'up' : 'down',
    String(s.Term),
    !s.Registered && s.AppliedSeq === 0
      ? '-'
      : s.AppliedIndex === null
        ? String(s.AppliedSeq)
        : `${s.AppliedSeq} (index ${s.AppliedIndex})`,
    String(s.LagBatches),
    s.InSyncSet ? 'yes' : 'no',
    s.Connected ? 'yes' : 'no',
  ]);
  const lines = [table(['Node', 'Address', 'Role', 'State', 'Term', 'Applied', 'Lag', 'Sync set', 'Connected'], rows)];
  if (v.Problem) lines.push(`Problem: ${v.Problem}`);
  if (v.RunningWithoutSyncCopy)
    lines.push('Warning: the leader is running without a synchronous copy; its acknowledged writes are on no other server');
  if (v.Leader === null) lines.push('No leader is known in this datacenter');
  lines.push(`Answered by ${v.AnsweredBy}`);
  return lines.join('\n');
}

/** The primary a server follows, as `watchword operator primary` prints it. */
export function formatPrimary(v: OperatorPrimaryResponse): string {
  return [
    `Primary datacenter: ${v.Datacenter}`,
    `Epoch:              ${v.Epoch}`,
    `Index applied:      ${v.Index}`,
    ...(v.LastContact !== undefined ? [`Last contact:       ${v.LastContact}`] : []),
  ].join('\n');
}

/** `watchword operator servers`, the counterpart of `consul operator raft list-peers`; `watchword operator primary`. */
export function operatorCommand(program: Command): void {
  const operator = program.command('operator').description("inspect this datacenter's servers (like `consul operator`)");
  common(
    operator.command('servers').description("list the datacenter's servers: role, term, applied position, lag, synchronous set"),
  ).action(run<CommonOptions>(async (o, c) => print(o, await c.operator.servers(), formatServers)));
  common(
    operator
      .command('primary')
      .description('show the primary this server follows: its datacenter, its epoch, the index applied here, when last heard'),
  ).action(run<CommonOptions>(async (o, c) => print(o, await c.operator.primary(), formatPrimary)));
}
