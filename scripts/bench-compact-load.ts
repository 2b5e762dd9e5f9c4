/**
 * The compact form's load (issue 37, in progress): a data dir's tokens read from LevelDB into a
 * RecordArena with the accessor and secret ID tables, nothing decoded; prints the time and the
 * bytes per token (V8 heap, ArrayBuffers, RSS). Run it bundled, as the daemon runs (tsx's
 * keep-names helpers make it several times slower):
 *   npx esbuild scripts/bench-compact-load.ts --bundle --platform=node --format=esm \
 *     --packages=external --outfile=node_modules/.cache/bench-compact-load.mjs
 *   node --expose-gc --max-semi-space-size=64 node_modules/.cache/bench-compact-load.mjs DATA_DIR/store
 * (a store seeded by `npm run bench:scale`'s seeding, e.g. scripts/bench-seed.ts's seedTo).
 */
import { Level } from 'level';
import { RecordArena } from '../src/store/compact/arena.js';
import { IdTable } from '../src/store/compact/id-table.js';
import { fieldOffsets, stringAt } from '../src/store/compact/scan.js';
const dir = process.argv[2] as string;
global.gc?.();
const m0 = process.memoryUsage();
const t0 = performance.now();
const db = new Level<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' });
await db.open();
const arena = new RecordArena();
const accessors = new IdTable();
const secrets = new IdTable();
const keys = [Buffer.from('AccessorID'), Buffer.from('SecretID')];
const at = new Int32Array(2);
const it = db.values({ gte: 't\u0000', lt: 't\u0001', highWaterMarkBytes: 8 * 1024 * 1024 });
let next = it.nextv(10_000);
let n = 0;
for (let batch = await next; batch.length > 0; batch = await next) {
  next = it.nextv(10_000);
  for (const v of batch) {
    if (!fieldOffsets(v, keys, at)) throw new Error('not a map');
    const slot = arena.add(v);
    accessors.set(stringAt(v, at[0] as number) as string, slot);
    secrets.set(stringAt(v, at[1] as number) as string, slot);
    n++;
  }
}
await it.close();
const ms = performance.now() - t0;
global.gc?.(); global.gc?.();
const m1 = process.memoryUsage();
console.log(JSON.stringify({ tokens: n, loadMs: Math.round(ms), heapPerToken: Math.round((m1.heapUsed - m0.heapUsed) / n), arrayBuffersPerToken: Math.round((m1.arrayBuffers - m0.arrayBuffers) / n), rssPerToken: Math.round((m1.rss - m0.rss) / n), arenaBytesPerToken: Math.round(arena.bytes / n), idTablesPerToken: Math.round((accessors.bytes + secrets.bytes) / n) }));
await db.close();
