/**
 * Go-style durations ("90s", "1h30m", "1.5h", "300ms") as used by Consul for
 * ExpirationTTL, wait times and config values. Values are milliseconds here;
 * sub-millisecond parts are kept as fractions.
 */
const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const PART_RE = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/** Parses a Go duration string into milliseconds; returns undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  let s = text.trim();
  if (s === '') return undefined;
  let sign = 1;
  if (s[0] === '-' || s[0] === '+') {
    if (s[0] === '-') sign = -1;
    s = s.slice(1);
  }
  if (s === '0') return 0;
  if (s === '') return undefined;
  let total = 0;
  PART_RE.lastIndex = 0;
  let pos = 0;
  while (pos < s.length) {
    PART_RE.lastIndex = pos;
    const m = PART_RE.exec(s);
    if (!m || m.index !== pos) return undefined;
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
    pos = PART_RE.lastIndex;
  }
  if (!Number.isFinite(total)) return undefined;
  return sign * total;
}

/** Formats milliseconds the way Go's time.Duration.String() does ("1m0s", "1.5s", "24h0m0s"). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const neg = ms < 0;
  let rest = Math.abs(ms);
  let out: string;
  if (rest < 1000) {
    if (rest < 1e-3) out = `${trim(rest * 1e6)}ns`;
    else if (rest < 1) out = `${trim(rest * 1e3)}µs`;
    else out = `${trim(rest)}ms`;
  } else {
    const h = Math.floor(rest / 3_600_000);
    rest -= h * 3_600_000;
    const m = Math.floor(rest / 60_000);
    rest -= m * 60_000;
    const s = `${trim(rest / 1000)}s`;
    out = h > 0 ? `${h}h${m}m${s}` : m > 0 ? `${m}m${s}` : s;
  }
  return neg ? `-${out}` : out;
}

function trim(n: number): string {
  // Up to nanosecond precision, without trailing zeros, like Go.
  return Number(n.toFixed(9)).toString();
}
