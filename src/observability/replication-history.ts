import type { ReplicationStatusResponse } from '../api/schemas.js';

/** One reading of a datacenter's replication: how far behind it was, and whether it was connected. */
export interface LagSample {
  /** ms since the epoch. */
  Time: number;
  Datacenter: string;
  LagEntries: number;
  LastContactMs: number;
  Connected: boolean;
}

/**
 * Replication lag over the last hour, kept in memory (no external store), for the web UI's
 * chart: every `intervalMs` the replication status is read once. On the primary that gives
 * each connected secondary's lag as the primary sees it; on a secondary, its own.
 */
export class ReplicationHistory {
  private readonly samples: LagSample[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly status: () => ReplicationStatusResponse,
    private readonly options: { intervalMs: number; keepMs: number; datacenter: string },
  ) {}

  start(): void {
    this.take();
    this.timer = setInterval(() => this.take(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** The samples of the last `keepMs`, oldest first. */
  read(): { IntervalMs: number; Samples: LagSample[] } {
    return { IntervalMs: this.options.intervalMs, Samples: [...this.samples] };
  }

  private take(): void {
    const now = Date.now();
    let s: ReplicationStatusResponse;
    try {
      s = this.status();
    } catch {
      return;
    }
    if (s.Enabled) {
      this.samples.push({
        Time: now,
        Datacenter: this.options.datacenter,
        LagEntries: s.LagEntries,
        LastContactMs: s.LastContactMs,
        Connected: s.Connected,
      });
    }
    for (const d of s.Secondaries ?? []) {
      this.samples.push({ Time: now, Datacenter: d.Datacenter, LagEntries: d.LagEntries, LastContactMs: d.LastContactMs, Connected: true });
    }
    const cutoff = now - this.options.keepMs;
    let drop = 0;
    while (drop < this.samples.length && (this.samples[drop] as LagSample).Time < cutoff) drop++;
    if (drop > 0) this.samples.splice(0, drop);
  }
}
