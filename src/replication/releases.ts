import { z } from 'zod';
import { POSITIONAL_FORMAT_NEEDS } from '../store/schema.js';
import {
  PREVIOUS_RELEASE,
  REPLICATION_PROTOCOL,
  SERVER_PROTOCOL,
  TEST_FORM,
  TEST_FORM_PROTOCOL,
  VERSION,
  type VersionRange,
  compareReleases,
} from '../version.js';

/**
 * The cluster's versions (docs/upgrading.md, "Upgrading"; etcd keeps a cluster version, CockroachDB
 * finalizes an upgrade): the release each server of each datacenter runs and the protocol
 * versions it speaks, as each datacenter's leader reports its servers (followers tell their
 * leader over the servers' stream, a secondary's leader tells the primary over replication), and
 * the level the cluster was finalized at. The primary holds the whole picture and sends it to
 * every secondary, whose leader sends it to its followers, so any server can answer
 * `GET /v1/operator/upgrade`, and any can tell whether a feature that needs every server is on.
 */

/** One server as the picture shows it. Release null: not heard from (down, or not yet connected). */
export const serverRelease = z.strictObject({
  Name: z.string().max(128),
  Release: z.string().max(64).nullable(),
  /** The replication and servers' stream versions it speaks, [min, max]. */
  Replication: z.tuple([z.number().int(), z.number().int()]).nullable(),
  Servers: z.tuple([z.number().int(), z.number().int()]).nullable(),
});
export type ServerRelease = z.infer<typeof serverRelease>;

export const datacenterReleases = z.strictObject({
  Datacenter: z.string().max(64),
  Servers: z.array(serverRelease).max(64),
  /** When its leader last reported them (ms since the epoch). */
  At: z.number(),
  /** Its leader speaks an older replication protocol that reports no servers: only the leader is known. */
  Partial: z.boolean(),
});
export type DatacenterReleases = z.infer<typeof datacenterReleases>;

/** What the cluster was finalized at: features that need every server at least this are on. */
export const finalizedLevel = z.strictObject({
  Release: z.string().max(64),
  Replication: z.number().int(),
  Servers: z.number().int(),
});
export type FinalizedLevel = z.infer<typeof finalizedLevel>;

export const clusterPicture = z.strictObject({
  Finalized: finalizedLevel.nullable(),
  Datacenters: z.array(datacenterReleases).max(256),
});
export type ClusterPicture = z.infer<typeof clusterPicture>;

/** This server as the picture shows it. */
export function selfRelease(name: string): ServerRelease {
  return {
    Name: name,
    Release: VERSION,
    Replication: [REPLICATION_PROTOCOL.min, REPLICATION_PROTOCOL.max],
    Servers: [SERVER_PROTOCOL.min, SERVER_PROTOCOL.max],
  };
}

/** A peer that spoke `replication` or `servers` at 0.1.0's version and told no more: what 0.1.0 speaks. */
export function previousRelease(name: string): ServerRelease {
  return { Name: name, Release: PREVIOUS_RELEASE.version, Replication: [4, 4], Servers: [2, 2] };
}

/** The level every server of the picture reaches: the lowest release, and the lowest highest version of each protocol. */
export function levelOf(picture: Pick<ClusterPicture, 'Datacenters'>): FinalizedLevel | undefined {
  let level: FinalizedLevel | undefined;
  for (const dc of picture.Datacenters) {
    for (const s of dc.Servers) {
      if (s.Release === null || s.Replication === null || s.Servers === null) return undefined;
      if (level === undefined) level = { Release: s.Release, Replication: s.Replication[1], Servers: s.Servers[1] };
      else {
        if (compareReleases(s.Release, level.Release) < 0) level.Release = s.Release;
        level.Replication = Math.min(level.Replication, s.Replication[1]);
        level.Servers = Math.min(level.Servers, s.Servers[1]);
      }
    }
  }
  return level;
}

/** Servers below `need` (a replication or servers' version, or a release), named `dc/server (release)`; unknown ones too. */
export function serversBehind(
  picture: Pick<ClusterPicture, 'Datacenters'>,
  need: { replication?: number; servers?: number; release?: string },
): string[] {
  const out: string[] = [];
  for (const dc of picture.Datacenters) {
    for (const s of dc.Servers) {
      const behind =
        s.Release === null ||
        (need.replication !== undefined && (s.Replication === null || s.Replication[1] < need.replication)) ||
        (need.servers !== undefined && (s.Servers === null || s.Servers[1] < need.servers)) ||
        (need.release !== undefined && compareReleases(s.Release, need.release) < 0);
      if (behind) out.push(`${dc.Datacenter}/${s.Name} (${s.Release ?? 'not heard from'})`);
    }
    if (dc.Partial) out.push(`${dc.Datacenter}/its other servers (their leader runs an older release that does not report them)`);
  }
  return out;
}

/** Whether a range holds a version. */
export const speaks = (range: VersionRange, v: number): boolean => v >= range.min && v <= range.max;

/** What the book needs of the store: the finalized level is kept there (written by the primary, then by each secondary told). */
export interface ReleaseStore {
  getMeta(key: string): unknown;
  transact<T>(fn: (tx: { putMeta(key: string, value: unknown): void }) => T): Promise<T>;
}

/** How long a datacenter's report is shown after it was last heard (a secondary gone that long is still listed, as last seen). */
const STALE_AFTER_MS = 60_000;

/**
 * The cluster's picture as this server knows it: its own datacenter's servers (asked of its
 * role when wanted), the other datacenters' as reported to the primary or heard from it, and the
 * finalized level (durable in the store). `revision` moves whenever what it would send moves.
 */
export class ReleaseBook {
  private readonly others = new Map<string, DatacenterReleases>();
  /** This datacenter as its leader last told it (what a follower shows of its own datacenter). */
  private heardOwn: DatacenterReleases | undefined;

  constructor(
    readonly datacenter: string,
    /** This datacenter's servers as this server sees them (complete at the leader). */
    private readonly ownServers: () => ServerRelease[],
    /** Whether this server leads its datacenter: a follower shows its own datacenter as its leader told it. */
    private readonly leads: () => boolean,
    private readonly store: ReleaseStore,
    private readonly metaKey: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** The level the cluster was finalized at (undefined: not yet, or a data dir of the previous release). */
  finalized(): FinalizedLevel | undefined {
    const v = finalizedLevel.safeParse(this.store.getMeta(this.metaKey));
    return v.success ? v.data : undefined;
  }

  /** Finalizes at `level` (the primary's leader, once every server reaches it; a secondary told by its primary). */
  async finalize(level: FinalizedLevel): Promise<void> {
    const had = this.finalized();
    if (had !== undefined && compareReleases(had.Release, level.Release) >= 0 && had.Replication >= level.Replication) return;
    await this.store.transact((tx) => tx.putMeta(this.metaKey, level));
  }

  /** At the primary: what a secondary's leader says of its datacenter's servers (partial: an older one, only itself known). */
  reported(datacenter: string, servers: ServerRelease[], partial: boolean): void {
    if (datacenter === this.datacenter) return;
    this.others.set(datacenter, { Datacenter: datacenter, Servers: servers, At: this.now(), Partial: partial });
  }

  /** At a secondary or a follower: the picture its primary (or leader) sent; its own datacenter stays its own view. */
  heard(picture: ClusterPicture): void {
    this.others.clear();
    for (const dc of picture.Datacenters) {
      if (dc.Datacenter === this.datacenter) this.heardOwn = dc;
      else this.others.set(dc.Datacenter, dc);
    }
  }

  picture(): ClusterPicture {
    const own: DatacenterReleases =
      !this.leads() && this.heardOwn !== undefined
        ? this.heardOwn
        : { Datacenter: this.datacenter, Servers: this.ownServers(), At: this.now(), Partial: false };
    return {
      Finalized: this.finalized() ?? null,
      Datacenters: [own, ...[...this.others.values()].sort((a, b) => a.Datacenter.localeCompare(b.Datacenter))],
    };
  }

  /** Datacenters whose report is older than a minute (shown as last heard, and holding back a finalize). */
  stale(): string[] {
    const now = this.now();
    return [...this.others.values()].filter((d) => now - d.At > STALE_AFTER_MS).map((d) => d.Datacenter);
  }

  /** What would be sent, as text: a session sends the picture again when this moved since it last did. */
  revision(): string {
    const p = this.picture();
    return JSON.stringify({ f: p.Finalized, d: p.Datacenters.map((d) => [d.Datacenter, d.Servers, d.Partial]) });
  }
}

/** A feature that needs every server to understand it (a new record field, frame or change kind). */
export interface Feature {
  Name: string;
  /** What it is, for operators. */
  What: string;
  /** The protocol versions every server must speak: it is on once the cluster was finalized at them. */
  Needs: { replication?: number; servers?: number };
  /**
   * On as soon as every server of every datacenter speaks what it needs, without a finalize: what
   * it writes the previous release passes over unread (a table of its own that release never
   * reads), so a rollback is unharmed. Absent: only once the upgrade is finalized.
   */
  BeforeFinalize?: true;
}

/**
 * This release's features that wait for everyone: quotas (their own table), tokens stored in the
 * form memory keeps (store format 3: each server converts its data dir at its first start after
 * the finalize, store/disk-format.ts); a test build (TEST_FORM) has its token field too.
 */
export const FEATURES: readonly Feature[] = [
  { Name: 'quotas', What: 'A quota', Needs: { replication: 5, servers: 3 }, BeforeFinalize: true },
  {
    Name: 'store-format-3',
    What: 'Tokens stored as memory holds them (each server converts its data dir at its next start)',
    Needs: POSITIONAL_FORMAT_NEEDS,
  },
  ...(TEST_FORM
    ? [{ Name: 'record-form-2', What: "records of form 2 (a test build's token Note)", Needs: { replication: TEST_FORM_PROTOCOL } }]
    : []),
];

/** Whether a feature is on at this finalized level. */
export function featureOn(finalized: FinalizedLevel | undefined, feature: Feature): boolean {
  if (finalized === undefined) return false;
  const { replication, servers } = feature.Needs;
  return (replication === undefined || finalized.Replication >= replication) && (servers === undefined || finalized.Servers >= servers);
}

export const needsText = (f: Feature): string =>
  [
    ...(f.Needs.replication !== undefined ? [`replication ${f.Needs.replication}`] : []),
    ...(f.Needs.servers !== undefined ? [`servers' stream ${f.Needs.servers}`] : []),
  ].join(' and ');

/** The record form a replication version carries: 2 from the test build's version, else 1. */
export const recordFormOf = (replicationVersion: number): number => (replicationVersion >= TEST_FORM_PROTOCOL ? 2 : 1);
