import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PREVIOUS_RELEASE, REPLICATION_PROTOCOL, VERSION, negotiate, peerRange } from '../../src/version.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
  watchword: { previousRelease: { version: string; commit: string } };
};

describe('the release this build is', () => {
  it("is package.json's version, and names the previous release as package.json does", () => {
    expect(VERSION).toBe(pkg.version);
    expect(pkg.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(PREVIOUS_RELEASE).toEqual(pkg.watchword.previousRelease);
  });

  it('has a CHANGELOG entry', () => {
    const changelog = readFileSync(new URL('../../CHANGELOG.md', import.meta.url), 'utf8');
    expect(changelog).toMatch(new RegExp(`^## ${VERSION.replace(/\./g, '\\.')}\\b`, 'm'));
    expect(changelog).toMatch(new RegExp(`^## ${PREVIOUS_RELEASE.version.replace(/\./g, '\\.')}\\b`, 'm'));
  });

  it("names a commit of this repository's history whose package.json is that release", () => {
    let shown: string;
    try {
      shown = execFileSync('git', ['show', `${PREVIOUS_RELEASE.commit}:package.json`], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      });
    } catch {
      // Not a git checkout (an installed package): nothing to check against.
      return;
    }
    expect((JSON.parse(shown) as { version: string }).version).toBe(PREVIOUS_RELEASE.version);
  });
});

describe('negotiation', () => {
  it('speaks the highest version both know; a peer of 0.1.0 names one', () => {
    expect(negotiate(REPLICATION_PROTOCOL, { min: 4, max: 4 })).toBe(4);
    expect(negotiate(REPLICATION_PROTOCOL, { min: 4, max: 9 })).toBe(REPLICATION_PROTOCOL.max);
    expect(negotiate(REPLICATION_PROTOCOL, { min: 99, max: 99 })).toBeUndefined();
    expect(peerRange('4', null)).toEqual({ min: 4, max: 4 });
    expect(peerRange('4', '5')).toEqual({ min: 4, max: 5 });
    expect(peerRange('5', '4')).toBeUndefined();
    expect(peerRange(null, '5')).toBeUndefined();
  });
});
