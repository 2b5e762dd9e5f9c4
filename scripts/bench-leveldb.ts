// The durable-write ceiling for bench.ts: raw LevelDB in a temp dir, WRITERS concurrent
// writers each doing a synced put of a token-sized value, for DURATION seconds.
// Prints one JSON line: { reqPerSec, p50ms, p99ms }.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Level } from 'level';

const DURATION = Number(process.argv[2] ?? 6);
const WRITERS = Number(process.argv[3] ?? 32);
const VALUE = Buffer.alloc(380, 'x');

const dir = await mkdtemp(join(tmpdir(), 'watchword-bench-leveldb-'));
const db = new Level<string, Buffer>(dir, { keyEncoding: 'utf8', valueEncoding: 'buffer' });
await db.open();
const latencies: number[] = [];
const end = performance.now() + DURATION * 1000;
let n = 0;
await Promise.all(
  Array.from({ length: WRITERS }, async () => {
    while (performance.now() < end) {
      const t = performance.now();
      await db.put(`t\u0000${crypto.randomUUID()}-${n++}`, VALUE, { sync: true });
      latencies.push(performance.now() - t);
    }
  }),
);
await db.close();
await rm(dir, { recursive: true, force: true });
latencies.sort((a, b) => a - b);
const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] as number;
process.stdout.write(`${JSON.stringify({ reqPerSec: Math.round(latencies.length / DURATION), p50ms: at(0.5), p99ms: at(0.99) })}\n`);
