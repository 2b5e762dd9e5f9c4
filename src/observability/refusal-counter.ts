/**
 * Which refusals the audit log writes in full (docs/audit.md: Audit log): per client, status and code,
 * the first `burst` of each window, and at most `windowLines` in all; the rest are counted, and
 * each (client, status, code) with refusals counted is written once per window as one line
 * carrying their `Count`. So one anonymous client, or many, can add only so many lines a
 * minute: a flood of refusals is recorded, not a log that rotates the record of changes away.
 */
export interface CountedRefusals<S> {
  client: string;
  status: number;
  code: string;
  /** Refusals counted, not written one by one. */
  count: number;
  /** First and last of them (ms since the epoch). */
  first: number;
  last: number;
  /** The last of them, as it would have been written. */
  sample: S;
}

interface Entry<S> {
  /** The client it counts for (`*` once MAX_CLIENTS are tracked). */
  client: string;
  written: number;
  counted?: CountedRefusals<S>;
}

/** Clients tracked at once; refusals of any further client are counted as one client, `*`. */
const MAX_CLIENTS = 10_000;

export class RefusalCounter<S> {
  private entries = new Map<string, Entry<S>>();
  private writtenInWindow = 0;

  constructor(
    private readonly burst = 10,
    private readonly windowLines = 1_000,
  ) {}

  /**
   * True: write this refusal in full. False: it was counted (its sample kept for the window's
   * line). With a `credential` (the caller's AccessorID, or the HMAC naming an unknown secret),
   * the credential's own burst must have room too: many addresses sharing one stolen secret, or
   * one address trying many, are held as one client is.
   */
  admit(client: string, status: number, code: string, at: number, sample: S, credential?: string): boolean {
    const entry = this.entryOf(client, status, code);
    const byCredential = credential === undefined ? undefined : this.entryOf(`\u0001${credential}`, status, code);
    if (entry.written < this.burst && (byCredential?.written ?? 0) < this.burst && this.writtenInWindow < this.windowLines) {
      entry.written++;
      if (byCredential !== undefined) byCredential.written++;
      this.writtenInWindow++;
      return true;
    }
    if (entry.counted === undefined) entry.counted = { client: entry.client, status, code, count: 0, first: at, last: at, sample };
    const c = entry.counted;
    c.count++;
    c.last = at;
    c.sample = sample;
    return false;
  }

  private entryOf(client: string, status: number, code: string): Entry<S> & { client: string } {
    let key = `${client}\u0000${status}\u0000${code}`;
    let entry = this.entries.get(key);
    if (entry === undefined) {
      if (this.entries.size >= MAX_CLIENTS) {
        client = '*';
        key = `*\u0000${status}\u0000${code}`;
        entry = this.entries.get(key);
      }
      if (entry === undefined) this.entries.set(key, (entry = { written: 0, client }));
    }
    return entry;
  }

  /** The window ends: what was counted in it, and a new window starts. */
  drain(): Array<CountedRefusals<S>> {
    const out: Array<CountedRefusals<S>> = [];
    for (const e of this.entries.values()) if (e.counted !== undefined) out.push(e.counted);
    this.entries = new Map();
    this.writtenInWindow = 0;
    return out;
  }
}
