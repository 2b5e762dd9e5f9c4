import type { OperatorUpgradeResponse } from './api/schemas.js';
import type { Config } from './config/schema.js';
import { WatchwordError } from './domain/errors.js';
import type { ClusterRole } from './ha/cluster-role.js';
import { FEATURES, type Feature, type ReleaseBook, featureOn, levelOf, needsText, serversBehind } from './replication/releases.js';
import { VERSION } from './version.js';

/**
 * What GET /v1/operator/upgrade says, and PUT /v1/operator/upgrade?finalize does (docs/upgrading.md,
 * "Upgrading"): from the cluster's picture (replication/releases.ts). A finalize is taken at the
 * primary's leader only when every server of every datacenter it knows runs this release, each
 * heard from within a minute; it records the level they all reach, and the features that need
 * it come on. Until then nothing the previous release cannot read is written.
 */
export class UpgradeStatus {
  constructor(
    private readonly config: Config,
    private readonly cluster: ClusterRole,
    private readonly releases: ReleaseBook,
    private readonly onFinalized?: (details: Record<string, unknown>) => void,
  ) {}

  status(): OperatorUpgradeResponse {
    const picture = this.releases.picture();
    const level = levelOf(picture) ?? null;
    const behind = serversBehind(picture, { release: VERSION });
    const missing = this.missingDatacenters(picture.Datacenters.map((d) => d.Datacenter));
    const finalized = this.releases.finalized();
    return {
      Release: VERSION,
      Finalized: picture.Finalized,
      Datacenters: picture.Datacenters.map((d) => ({
        Datacenter: d.Datacenter,
        Partial: d.Partial,
        LastReport: new Date(d.At).toISOString(),
        Servers: d.Servers,
      })),
      Level: level,
      Behind: [...behind, ...missing.map((dc) => `${dc} (not heard from)`)],
      CanFinalize: this.cluster.kind === 'primary' && behind.length === 0 && missing.length === 0 && level !== null,
      Waiting: FEATURES.filter((f) => !this.on(f, finalized)).map((f) => ({
        Feature: f.Name,
        Needs: needsText(f),
        Behind: serversBehind(picture, f.Needs),
      })),
    };
  }

  /** Finalizes the upgrade: refused while any server runs an older release (or is not heard from), or away from the primary. */
  async finalize(): Promise<OperatorUpgradeResponse> {
    if (this.cluster.kind !== 'primary')
      throw new WatchwordError(
        'INVALID_REQUEST',
        'An upgrade is finalized at the primary datacenter (writes there are sent to its leader)',
      );
    const status = this.status();
    if (!status.CanFinalize || status.Level === null)
      throw new WatchwordError(
        'CONFLICT',
        `Cannot finalize the upgrade to ${VERSION}: every server of every datacenter must run it first; still behind: ${status.Behind.join(', ')}`,
      );
    await this.releases.finalize(status.Level);
    this.onFinalized?.({ Level: status.Level });
    return this.status();
  }

  private auto: NodeJS.Timeout | undefined;

  /** upgrade_auto_finalize: the primary's leader finalizes by itself once it can (looked at every `everyMs`). */
  startAuto(everyMs = 10_000): void {
    if (!this.config.upgrade_auto_finalize || this.auto) return;
    this.auto = setInterval(() => {
      if (!this.cluster.isLeader() || this.cluster.kind !== 'primary') return;
      const s = this.status();
      const had = s.Finalized;
      if (!s.CanFinalize || s.Level === null) return;
      if (had !== null && had.Release === s.Level.Release && had.Replication >= s.Level.Replication && had.Servers >= s.Level.Servers)
        return;
      this.finalize().catch(() => undefined);
    }, everyMs);
    this.auto.unref();
  }

  stop(): void {
    clearInterval(this.auto);
  }

  /**
   * Whether a feature is on: the cluster was finalized at a level that has it, or (one the previous
   * release passes over unread) every server of every datacenter this server knows speaks what it needs.
   */
  private on(feature: Feature, finalized = this.releases.finalized()): boolean {
    if (featureOn(finalized, feature)) return true;
    if (!feature.BeforeFinalize) return false;
    const picture = this.releases.picture();
    return (
      serversBehind(picture, feature.Needs).length === 0 &&
      this.missingDatacenters(picture.Datacenters.map((d) => d.Datacenter)).length === 0
    );
  }

  /** Throws FEATURE_NOT_ENABLED, naming the servers behind, unless `name` is on. */
  require(name: string): void {
    const feature = FEATURES.find((f) => f.Name === name) as Feature | undefined;
    if (feature === undefined || this.on(feature)) return;
    const picture = this.releases.picture();
    const behind = [
      ...serversBehind(picture, feature.Needs),
      ...this.missingDatacenters(picture.Datacenters.map((d) => d.Datacenter)).map((dc) => `${dc} (not heard from)`),
    ];
    const needs = feature.BeforeFinalize
      ? `every server of every datacenter to speak ${needsText(feature)}`
      : `every server to speak ${needsText(feature)} and the upgrade finalized (watchword operator upgrade finalize)`;
    throw new WatchwordError(
      'FEATURE_NOT_ENABLED',
      `${feature.What} needs ${needs}; ${behind.length > 0 ? `still behind: ${behind.join(', ')}` : 'not finalized yet'}`,
    );
  }

  /** Datacenters this server knows of (configured, or reported over replication) that the picture lacks. */
  private missingDatacenters(present: string[]): string[] {
    const known = new Set([...Object.keys(this.config.datacenter_addresses), ...this.cluster.reportedDatacenters().map((d) => d.name)]);
    known.delete(this.config.datacenter);
    return [...known].filter((dc) => !present.includes(dc)).sort();
  }
}
