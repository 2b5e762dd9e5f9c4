/** A daemon's Prometheus histograms as the benchmarks read them (`/v1/agent/metrics?format=prometheus`). */
/** Cumulative buckets of a Prometheus histogram, from the text format. */
/** One scrape of a daemon's metrics as Prometheus text. */
async function scrape(url: string, token: string): Promise<string> {
  return (await fetch(`${url}/v1/agent/metrics?format=prometheus`, { headers: { 'X-Service-Token': token } })).text();
}

export async function histogram(url: string, name: string, token: string): Promise<Array<[number, number]>> {
  const text = await scrape(url, token);
  const out: Array<[number, number]> = [];
  for (const m of text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\d+)$`, 'gm'))) {
    out.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
  }
  return out;
}

/** Gauges without labels by name (`watchword_` prefixed), from one scrape of the Prometheus text. */
export async function gauges(url: string, names: readonly string[], token: string): Promise<Record<string, number>> {
  const text = await scrape(url, token);
  const out: Record<string, number> = {};
  for (const name of names) {
    const m = new RegExp(`^watchword_${name} (\\S+)$`, 'm').exec(text);
    if (m) out[name] = Number(m[1]);
  }
  return out;
}

/** A quantile from cumulative bucket counts, interpolating inside the bucket (as Prometheus does). */
export function quantile(buckets: Array<[number, number]>, q: number): number {
  const total = buckets[buckets.length - 1]?.[1] ?? 0;
  const rank = q * total;
  let prevBound = 0;
  let prevCount = 0;
  for (const [bound, count] of buckets) {
    if (count >= rank) {
      if (!Number.isFinite(bound)) return prevBound;
      return prevBound + ((bound - prevBound) * (rank - prevCount)) / Math.max(1, count - prevCount);
    }
    prevBound = bound;
    prevCount = count;
  }
  return Number.NaN;
}
