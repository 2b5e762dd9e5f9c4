import { z } from 'zod';
import { META } from '../store/schema.js';
import { epochSeenBy } from './apply.js';

/** Where a primary took over (docs/datacenters.md): the previous primary, its epoch, and its last index the new one had applied. */
export const takeover = z.strictObject({
  From: z.string().min(1).max(256),
  Epoch: z.number().int().positive(),
  Index: z.number().int().nonnegative(),
  /** The previous primary's log (the one its secondaries' cursors name). */
  Log: z.string().max(256).optional(),
});
export type Takeover = z.infer<typeof takeover>;

/**
 * The primary a datacenter follows (or itself), as a promotion, a handover or a newer primary
 * learned from a peer left it (docs/datacenters.md). Stored in the store's metadata, so it outlives restarts
 * and reaches an HA datacenter's followers with the batch that wrote it; absent, the configuration
 * (`primary_datacenter`, `primary_address`) says.
 */
export const placementRecord = z.strictObject({
  /** The primary datacenter. */
  Primary: z.string().min(1).max(256),
  /** Its epoch. */
  Epoch: z.number().int().positive(),
  /** Its servers' base URLs (empty when it is this datacenter). */
  Addresses: z.array(z.string().max(2048)).max(64),
  /** Set by a promotion (or a handover): the primary it took over from, its epoch, and its last index applied here then. */
  Took: takeover.optional(),
});
export type PlacementRecord = z.infer<typeof placementRecord>;

/** Where this datacenter stands now. */
export interface Standing {
  readonly primary: string;
  readonly isPrimary: boolean;
  /** The primary's servers (a secondary's), tried in turn. */
  readonly addresses: readonly string[];
}

/** What the configuration says before anything moved: `primary_datacenter` and `primary_address`. */
export interface ConfiguredPlacement {
  datacenter: string;
  primaryDatacenter: string;
  primaryAddresses: readonly string[];
}

/** This datacenter's standing, read from the store each time it is asked (a follower's store changes under it). */
export class Placement {
  private last: { raw: unknown; standing: Standing } | undefined;

  constructor(
    private readonly store: { getMeta(key: string): unknown },
    private readonly configured: ConfiguredPlacement,
  ) {}

  get datacenter(): string {
    return this.configured.datacenter;
  }

  /** The record that moved it, when one did. */
  stored(): PlacementRecord | undefined {
    const parsed = placementRecord.safeParse(this.store.getMeta(META.placement));
    return parsed.success ? parsed.data : undefined;
  }

  now(): Standing {
    const raw = this.store.getMeta(META.placement);
    if (this.last && this.last.raw === raw) return this.last.standing;
    const moved = this.stored();
    const c = this.configured;
    const primary = moved?.Primary ?? c.primaryDatacenter;
    const standing: Standing = {
      primary,
      isPrimary: primary === c.datacenter,
      addresses: primary === c.datacenter ? [] : moved ? moved.Addresses : c.primaryAddresses,
    };
    this.last = { raw, standing };
    return standing;
  }

  isPrimary(): boolean {
    return this.now().isPrimary;
  }

  primaryDatacenter(): string {
    return this.now().primary;
  }

  /** The highest primary epoch this datacenter knows of: its own as primary, the one it follows, or one it has seen. */
  epoch(): number {
    return epochSeenBy(this.store);
  }
}
