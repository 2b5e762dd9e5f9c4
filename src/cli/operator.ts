import type { Command } from 'commander';
import type { OperatorPrimaryResponse, OperatorServersResponse, OperatorUpgradeResponse, PromotionResponse } from '../client/index.js';
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

/** What a promotion or a planned transfer did, as `watchword operator primary promote|transfer` prints it. */
export function formatPromotion(v: PromotionResponse): string {
  return [
    `Primary datacenter: ${v.Datacenter} (epoch ${v.Epoch})`,
    `Previous primary:   ${v.PreviousPrimary} (epoch ${v.PreviousEpoch})`,
    `Recovery point:     index ${v.LastIndex} of ${v.PreviousPrimary}`,
    ...(v.LastContact !== undefined ? [`Last heard:         ${v.LastContact}`] : []),
    ...(v.WritesPausedMs !== undefined ? [`Writes paused:      ${v.WritesPausedMs} ms`] : []),
    ...(v.Forced ? ['Forced:             yes (the previous primary was still heard)'] : []),
    '',
    v.Warning,
  ].join('\n');
}

/** `watchword operator servers`, the counterpart of `consul operator raft list-peers`; `watchword operator primary`. */
export function operatorCommand(program: Command): void {
  const operator = program.command('operator').description("inspect this datacenter's servers (like `consul operator`)");
  common(
    operator.command('servers').description("list the datacenter's servers: role, term, applied position, lag, synchronous set"),
  ).action(run<CommonOptions>(async (o, c) => print(o, await c.operator.servers(), formatServers)));
  const primary = operator
    .command('primary')
    .description('show the primary this server follows: its datacenter, its epoch, the index applied here, when last heard');
  common(primary).action(run<CommonOptions>(async (o, c) => print(o, await c.operator.primary(), formatPrimary)));
  common(
    primary
      .command('promote')
      .description(
        'make this secondary datacenter the primary after the primary is lost (epoch + 1); prints the recovery point: global ' +
          'writes after it may be lost',
      )
      .option('--force', 'promote even though this datacenter still hears the primary (two primaries until it is fenced)'),
  ).action(run<CommonOptions & { force?: boolean }>(async (o, c) => print(o, await c.operator.promote(o.force === true), formatPromotion)));
  common(
    primary
      .command('transfer')
      .description('at the primary: hand its role to a connected secondary, losing nothing (writes wait a moment)')
      .requiredOption('--to <DATACENTER>', 'the secondary datacenter that becomes the primary'),
  ).action(run<CommonOptions & { to: string }>(async (o, c) => print(o, await c.operator.transfer(o.to), formatPromotion)));
  const raft = operator.command('raft').description("the datacenter's leadership (like `consul operator raft`)");
  common(
    raft
      .command('transfer-leader')
      .description(
        "hand the datacenter's leadership to another server before restarting its leader: the leader steps down and follows, " +
          'losing nothing (the new leader is a member of its synchronous set)',
      )
      .option('--id <NAME>', 'the server to hand leadership to (default: a member of the synchronous set)'),
  ).action(
    run<CommonOptions & { id?: string }>(async (o, c) =>
      print(o, await c.operator.transferLeader(o.id), (v) => `Leadership handed from ${v.From} to ${v.To} (term ${v.Term})`),
    ),
  );
  const upgrade = operator.command('upgrade').description('the releases servers run during an upgrade, and its finalizing');
  common(
    upgrade
      .command('status')
      .description("every datacenter's servers: the release each runs and the versions it speaks; what waits for the finalize"),
  ).action(run<CommonOptions>(async (o, c) => print(o, await c.operator.upgrade(), formatUpgrade)));
  common(
    upgrade
      .command('finalize')
      .description('finish the upgrade once every server runs this release: features that need everyone come on; no rollback after'),
  ).action(run<CommonOptions>(async (o, c) => print(o, await c.operator.finalize(), formatUpgrade)));
}

/** An upgrade's status, as `watchword operator upgrade status` prints it. */
function formatUpgrade(v: OperatorUpgradeResponse): string {
  const range = (r: [number, number] | null) => (r === null ? '-' : r[0] === r[1] ? `${r[0]}` : `${r[0]}-${r[1]}`);
  const rows = v.Datacenters.flatMap((d) =>
    d.Servers.map((s) => [d.Datacenter, s.Name, s.Release ?? 'not heard from', range(s.Replication), range(s.Servers)]),
  );
  const level = (l: OperatorUpgradeResponse['Finalized']) =>
    l === null ? 'no' : `${l.Release} (replication ${l.Replication}, servers ${l.Servers})`;
  return [
    table(['Datacenter', 'Server', 'Release', 'Replication', 'Servers'], rows),
    '',
    `Finalized:     ${level(v.Finalized)}`,
    `Can finalize:  ${v.CanFinalize ? 'yes' : 'no'}`,
    ...(v.Behind.length > 0 ? [`Behind:        ${v.Behind.join(', ')}`] : []),
    ...v.Waiting.map((w) => `Waiting:       ${w.Feature} (needs ${w.Needs})${w.Behind.length > 0 ? `: ${w.Behind.join(', ')}` : ''}`),
  ].join('\n');
}
