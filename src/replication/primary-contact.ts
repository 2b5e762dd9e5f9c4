/**
 * When a secondary's server last knew the primary to be heard, for replication_max_stale: by
 * its own replication while it leads, or by what its leader reports with each ping while it
 * follows. One clock per server that outlives every change of role, so a server that knows no
 * leader keeps counting from the last report it had, and a new leader starts from what it knew
 * as a follower rather than from zero. It starts at the process's start.
 */
export class PrimaryContact {
  private heardAt: number;
  private listener: (() => void) | undefined;

  constructor(private readonly now: () => number = Date.now) {
    this.heardAt = now();
  }

  /**
   * Called each time the primary itself is heard (not when a leader reports it): a secondary's
   * leader relays it to its followers at once, so their clocks lag the primary's heartbeat by
   * one hop, not by its own heartbeat as well.
   */
  onHeardDirectly(listener: () => void): void {
    this.listener = listener;
  }

  /** The primary was heard `agoMs` ago (0: just now). The clock only moves forward. */
  heard(agoMs = 0): void {
    this.heardAt = Math.max(this.heardAt, this.now() - Math.max(0, agoMs));
  }

  /** The primary's own stream delivered a frame just now. */
  heardDirectly(): void {
    this.heard(0);
    this.listener?.();
  }

  silentForMs(): number {
    return Math.max(0, this.now() - this.heardAt);
  }
}
