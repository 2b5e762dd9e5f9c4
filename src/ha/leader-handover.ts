import type { ReplicationStatusResponse, TransferLeaderResponse } from '../api/schemas.js';
import type { Config } from '../config/schema.js';
import { WatchwordError } from '../domain/errors.js';
import { PeerClient } from '../transport/peer-client.js';
import type { Transport } from '../transport/transport.js';
import type { HandedOver } from './coordinator.js';
import type { ServerGroup } from './servers.js';

/** How long a leadership handover may take before the request answers that the new leader has not taken it. */
const TRANSFER_WAIT_MS = 10_000;

/** What a handover needs of the server it runs on. */
export interface HandoverHost {
  group: ServerGroup;
  config: Config;
  transport: Transport;
  /** Whether this datacenter is the primary now (its secondaries then move to the new leader). */
  isPrimary(): boolean;
  /** This server's replication status (the primary's: its secondaries). */
  replicationStatus(): ReplicationStatusResponse;
  /** The leader's client, when this server follows one. */
  leaderClient(): PeerClient | undefined;
  audit(details: Record<string, unknown>): void;
}

/**
 * POST /v1/operator/raft/transfer-leader (docs/servers.md), at any server of a datacenter that elects
 * its leader: the leadership goes to a member of the synchronous set in one etcd transaction, and the
 * answer comes once the old leader knows it no longer leads and the secondaries that streamed from it
 * stream from the new one, so the old leader may be restarted at once.
 */
export async function handOverLeadership(host: HandoverHost, to: string | undefined, by: string): Promise<TransferLeaderResponse> {
  const started = Date.now();
  const deadline = started + TRANSFER_WAIT_MS;
  const streaming = host.isPrimary() ? await secondariesOf(host, host.group.isLeader() ? undefined : host.leaderClient()) : [];
  const done = await host.group.coordinator.handOver(to, TRANSFER_WAIT_MS);
  host.audit({ From: done.from, To: done.to, Term: done.term, By: by });
  await steppedDown(host, done, deadline);
  await secondariesMoved(host, done, streaming, deadline);
  return { Success: true, From: done.from, To: done.to, Term: done.term };
}

/** A client of another server of this datacenter, by the address it registered. */
function peerAt(host: HandoverHost, address: string): PeerClient {
  const { transport, config } = host;
  return new PeerClient(transport.peerURL(address), config.datacenter, transport.fetcher({ datacenter: config.datacenter }));
}

const pause = (): Promise<void> => new Promise((r) => setTimeout(r, 50));

/** The secondaries a primary's server replicates to (`via` undefined: this one; else the server it names), by datacenter. */
async function secondariesOf(host: HandoverHost, via: PeerClient | undefined): Promise<string[]> {
  if (via === undefined) return (host.replicationStatus().Secondaries ?? []).map((s) => s.Datacenter);
  try {
    const res = await via.request('GET', '/v1/acl/replication', {}, undefined, 2000);
    if (res.status !== 200) return [];
    return ((JSON.parse(res.text) as ReplicationStatusResponse).Secondaries ?? []).map((s) => s.Datacenter);
  } catch {
    return [];
  }
}

/**
 * Resolves once every secondary that streamed from the old leader streams from the new one (or at
 * the deadline: a secondary that is away does not hold the answer up): the old leader is then asked
 * nothing more, and its restart cuts no forwarded write short.
 */
async function secondariesMoved(host: HandoverHost, done: HandedOver, streaming: string[], deadline: number): Promise<void> {
  if (streaming.length === 0) return;
  const to = host.group.coordinator.knownServers().find((s) => s.name === done.to);
  if (!to) return;
  const next = done.to === host.config.node_name ? undefined : peerAt(host, to.address);
  while (Date.now() < deadline) {
    const now = await secondariesOf(host, next);
    if (streaming.every((dc) => now.includes(dc))) return;
    await pause();
  }
}

/**
 * Resolves once the server that led knows it no longer does (it has seen the new leader, so it
 * acknowledges nothing more), or cannot be reached: a handover answers only when the old leader may
 * be restarted. A release that took writes while stopping (version.ts, FENCED_ON_STOP) must not be
 * stopped a moment before.
 */
async function steppedDown(host: HandoverHost, done: HandedOver, deadline: number): Promise<void> {
  const servers = host.group.coordinator.knownServers();
  const from = servers.find((s) => s.name === done.from);
  const to = servers.find((s) => s.name === done.to);
  if (!from || !to) return;
  if (done.from === host.config.node_name) {
    while (host.group.isLeader() && Date.now() < deadline) await pause();
    return;
  }
  const old = peerAt(host, from.address);
  while (Date.now() < deadline) {
    try {
      const res = await old.request('GET', '/v1/status/leader', {}, undefined, Math.max(100, deadline - Date.now()));
      if (res.status === 200 && JSON.parse(res.text) === to.address) return;
    } catch {
      // Gone (stopped meanwhile): it takes nothing more.
      return;
    }
    await pause();
  }
  throw new WatchwordError(
    'NO_LEADER',
    `${done.to} leads (term ${done.term}), but ${done.from} has not yet seen it; wait until it names ${done.to} ` +
      `(GET /v1/status/leader there) before restarting it`,
  );
}
