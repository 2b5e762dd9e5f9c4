/**
 * What this build is and what it speaks (docs/upgrading.md, "Upgrading"): its release, the range of each
 * protocol it speaks with peers of another release, and the store formats it reads. A release
 * interoperates with the previous one for as long as an upgrade takes: every stream negotiates
 * the highest version both ends know, and nothing is written that the previous release cannot
 * read until the upgrade is finalized.
 */

/** This build's release (package.json's version; a test checks they agree). */
export const VERSION = '0.2.0';

/** The release before this one, which this one must run beside and roll back to (package.json's watchword.previousRelease). */
export const PREVIOUS_RELEASE = { version: '0.1.0', commit: '4ac2821786c391f603be41c0c8cb40f4d5cdf56e' } as const;

/** The versions of a protocol a build speaks, or of a store format it reads. */
export interface VersionRange {
  min: number;
  max: number;
}

/**
 * Test builds only: a build that knows one more record form (a token field of its own, hashed),
 * spoken on the replication stream as one more version. It stands for "a release that adds a
 * field" in the tests of the #9022 trap; no release sets it.
 */
export const TEST_FORM = process.env.WATCHWORD_BUILD_TEST_FORM === '1';

/**
 * Replication between datacenters. 4: release 0.1.0. 5: the servers of each datacenter and their
 * releases reported to the primary, the cluster's picture and the finalized release sent back.
 */
export const REPLICATION_PROTOCOL: VersionRange = { min: 4, max: TEST_FORM ? 6 : 5 };
/** The replication version that first carries the test build's token field (TEST_FORM). */
export const TEST_FORM_PROTOCOL = 6;

/** The stream between the servers of a datacenter. 2: release 0.1.0. 3: a follower's release reported, the cluster's picture sent down. */
export const SERVER_PROTOCOL: VersionRange = { min: 2, max: 3 };

/**
 * The first versions whose leader takes no write once it has stopped leading. A leader of 0.1.0
 * (server protocol 2, replication 4) gave its role up first when it stopped and then, for as long as
 * its HTTP listener still answered, acknowledged the writes forwarded to it as a lone server would:
 * writes its successor never holds. An answer from such a leader counts only once it arrives here
 * over that leader's own stream (http/forward.ts).
 */
export const FENCED_ON_STOP = { servers: 3, replication: 5 } as const;

/**
 * An enforcing client's watch. 1: release 0.1.0 (no credential, which this release refuses: such
 * a client keeps its tokens current over HTTP). 2: opened with the client's own token, SecondsLeft in views.
 * 3: first look-ups over the watch (a secret the server does not hold is resolved as a request's
 * token would be, and refused per entry with the status a request would get, never by closing
 * the watch); the upgrade's answer names the version in X-Service-Watch-Protocol.
 */
export const WATCH_PROTOCOL: VersionRange = { min: 2, max: 3 };

/** The store formats this build opens (it writes the highest only once the upgrade is finalized). */
export const STORE_FORMATS: VersionRange = { min: 1, max: 3 };

export const rangeText = (r: VersionRange): string => (r.min === r.max ? `${r.min}` : `${r.min}-${r.max}`);

/** The highest version both ranges hold, or undefined when they share none. */
export function negotiate(own: VersionRange, theirs: VersionRange): number | undefined {
  const v = Math.min(own.max, theirs.max);
  return v >= own.min && v >= theirs.min ? v : undefined;
}

/**
 * A peer's range from its upgrade request: `version` alone (what release 0.1.0 sends: exactly
 * that one), or `version` (the lowest it speaks, which an older end checks) with `max`.
 */
export function peerRange(version: string | null, max: string | null): VersionRange | undefined {
  const lo = Number(version);
  if (version === null || !Number.isSafeInteger(lo) || lo < 0) return undefined;
  if (max === null) return { min: lo, max: lo };
  const hi = Number(max);
  return Number.isSafeInteger(hi) && hi >= lo ? { min: lo, max: hi } : undefined;
}

/** Compares two releases (MAJOR.MINOR.PATCH): negative, zero or positive. */
export function compareReleases(a: string, b: string): number {
  const pa = a.split(/[.-]/).map((x) => Number.parseInt(x, 10) || 0);
  const pb = b.split(/[.-]/).map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** What this build is and speaks, as `watchword version` and /v1/agent/self say it. */
export function releaseInfo(): {
  Release: string;
  Protocols: { Replication: [number, number]; Servers: [number, number]; Watch: [number, number] };
  StoreFormats: [number, number];
} {
  const pair = (r: VersionRange): [number, number] => [r.min, r.max];
  return {
    Release: VERSION,
    Protocols: { Replication: pair(REPLICATION_PROTOCOL), Servers: pair(SERVER_PROTOCOL), Watch: pair(WATCH_PROTOCOL) },
    StoreFormats: pair(STORE_FORMATS),
  };
}
