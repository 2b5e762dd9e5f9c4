import type { Clock } from '../domain/clock.js';
import { isExpired } from '../domain/expiry.js';
import type { Access } from '../domain/rules/decisions.js';
import type { PolicyRecord, RoleRecord, Scope } from '../domain/types.js';
import type { StateReader } from '../store/store.js';
import { AclResolver } from './acl-resolver.js';
import type { RecentChecks } from './recent-checks.js';

/**
 * What a policy or role change would break (docs/operator-insight.md): the checks recently asked for the
 * tokens the change reaches (recent-checks.ts: decided at this server, reported by enforcing
 * clients), each judged as things are and as they would be after the change, by the same
 * resolver code over the state with the one record replaced. Nothing is written.
 */

export interface DryRunFlip {
  Resource: string;
  Segment?: string;
  Access: string;
  Namespace: string;
  Partition: string;
  /** The answer now, and after the change. */
  From: boolean;
  To: boolean;
  /** How many tokens' answer would flip so. */
  Tokens: number;
  /** One of them. */
  Example: string;
}

export interface DryRunAnswer {
  /** Tokens the change reaches (linking the policy, or a role that links it; or the role). */
  Tokens: number;
  /** Of those, the tokens with checks seen in the last hour, and the checks judged again. */
  TokensWithChecks: number;
  Checks: number;
  /** The checks whose answer would change, most tokens first (tokens the caller may read only). */
  Flips: DryRunFlip[];
  /**
   * Tokens the change reaches where the caller may not read (another namespace or partition):
   * counted, never named, nor what was asked for them. `Flipping`: those with a check that would flip.
   */
  OutOfScope?: { Tokens: number; Flipping: number };
  /** Checks the recorder could not keep (past its bounds): the answer may miss what they would show. */
  NotRecorded: number;
}

export class DryRunService {
  constructor(
    private readonly store: { reader: StateReader },
    private readonly resolver: AclResolver,
    private readonly recent: RecentChecks,
    private readonly clock: Clock,
    private readonly datacenter: string,
  ) {}

  private get reader(): StateReader {
    return this.store.reader;
  }

  /**
   * A policy replaced by `next`: the tokens linking it, and those linking a role that links it;
   * named only where `canSee` says the caller may read.
   */
  policyChange(next: PolicyRecord, canSee: (o: Scope) => boolean): DryRunAnswer {
    const reached = new Set(this.reader.tokenIDsBy('policy', next.ID));
    for (const r of this.reader.allRoles())
      if (r.Policies.some((l) => l.ID === next.ID)) for (const id of this.reader.tokenIDsBy('role', r.ID)) reached.add(id);
    return this.judge(reached, 'policies', next, canSee);
  }

  /** A role replaced by `next`: the tokens linking it. */
  roleChange(next: RoleRecord, canSee: (o: Scope) => boolean): DryRunAnswer {
    return this.judge(new Set(this.reader.tokenIDsBy('role', next.ID)), 'roles', next, canSee);
  }

  private judge(
    reached: Set<string>,
    table: 'policies' | 'roles',
    next: PolicyRecord | RoleRecord,
    canSee: (o: Scope) => boolean,
  ): DryRunAnswer {
    const after = new AclResolver({ reader: withRecord(this.reader, table, next), tableIndex: () => -1 }, this.clock, {
      datacenter: this.datacenter,
      defaultPolicy: this.resolver.defaultPolicy,
    });
    const flips = new Map<string, DryRunFlip>();
    const now = this.clock.now();
    let tokens = 0;
    let checks = 0;
    const hidden = { Tokens: 0, Flipping: 0 };
    for (const id of reached) {
      const token = this.reader.peekToken(id);
      if (token !== undefined && !canSee(token)) hidden.Tokens++;
    }
    for (const [accessor, asked] of this.recent.seen()) {
      if (!reached.has(accessor)) continue;
      const token = this.reader.peekToken(accessor);
      if (token === undefined || isExpired(token, now)) continue;
      const visible = canSee(token);
      tokens++;
      const before = this.resolver.compileOnce(token);
      const later = after.compileOnce(token);
      let flipped = false;
      for (const c of asked) {
        checks++;
        const segment = c.Segment ?? '';
        const access = c.Access as Access;
        const from = before.allows(c.Resource, segment, access, c.Partition, c.Namespace);
        const to = later.allows(c.Resource, segment, access, c.Partition, c.Namespace);
        if (from === to) continue;
        flipped = true;
        // Out of the caller's scope: counted only, neither the token nor what was asked for it named.
        if (!visible) continue;
        const key = `${c.Resource}\u0000${c.Segment ?? '\u0001'}\u0000${c.Access}\u0000${c.Partition}\u0000${c.Namespace}\u0000${from}`;
        const flip = flips.get(key);
        if (flip) flip.Tokens++;
        else flips.set(key, { ...c, From: from, To: to, Tokens: 1, Example: accessor });
      }
      if (flipped && !visible) hidden.Flipping++;
    }
    const list = [...flips.values()].sort(
      (a, b) => b.Tokens - a.Tokens || (a.Resource < b.Resource ? -1 : a.Resource > b.Resource ? 1 : 0),
    );
    return {
      Tokens: reached.size,
      TokensWithChecks: tokens,
      Checks: checks,
      Flips: list,
      ...(hidden.Tokens > 0 ? { OutOfScope: hidden } : {}),
      NotRecorded: this.recent.dropped,
    };
  }
}

/** The state with one policy or role replaced, as the resolver reads it (every other read goes to the state itself). */
function withRecord(reader: StateReader, table: 'policies' | 'roles', next: PolicyRecord | RoleRecord): StateReader {
  const getRecords: StateReader['getRecords'] = (t, ids) => {
    const records = reader.getRecords(t, ids);
    if (t !== table || !ids.includes(next.ID)) return records;
    const others = records.filter((r) => (r as { ID: string }).ID !== next.ID);
    return [...others, next] as typeof records;
  };
  return new Proxy(reader, {
    get(target, prop, receiver) {
      if (prop === 'getRecords') return getRecords;
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}
