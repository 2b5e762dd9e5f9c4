/**
 * The compact form (issue 37, in progress): a data dir's tokens read from LevelDB into a
 * CompactTable (records' bytes in an arena, the accessor and secret in ID tables), nothing
 * decoded; prints the load time and the bytes per token (V8 heap, ArrayBuffers, RSS), then
 * the cost of finding a token by its secret: a cold one (decoded from its bytes) and one of a
 * small hot set (kept decoded). Run it bundled, as the daemon runs (tsx's keep-names helpers
 * make it several times slower):
 *   npx esbuild scripts/bench-compact-load.ts --bundle --platform=node --format=esm \
 *     --packages=external --outfile=node_modules/.cache/bench-compact-load.mjs
 *   node --expose-gc --max-semi-space-size=64 node_modules/.cache/bench-compact-load.mjs DATA_DIR/store
 * (a store seeded as `npm run bench:scale` seeds one: scripts/bench-seed.ts's seedTo).
 */
import { Level } from 'level';
import type { TokenRecord } from '../src/domain/types.js';
import { CompactTable } from '../src/store/compact/compact-table.js';
import { decodeRaw, encode } from '../src/store/records.js';

const dir = process.argv[2] as string;
global.gc?.();
const m0 = process.memoryUsage();
const t0 = performance.now();
const db = new Level<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' });
await db.open();
const tokens = new CompactTable<TokenRecord>({
  id: { of: (t) => t.AccessorID, field: 'AccessorID' },
  unique: [{ name: 'secret', of: (t) => t.SecretID, field: 'SecretID' }],
  encode,
  decode: (b) => decodeRaw(b) as TokenRecord,
  cacheSize: 10_000,
});
const it = db.values({ gte: 't\u0000', lt: 't\u0001', highWaterMarkBytes: 8 * 1024 * 1024 });
let next = it.nextv(10_000);
for (let batch = await next; batch.length > 0; batch = await next) {
  next = it.nextv(10_000);
  for (const v of batch) if (!tokens.load(v)) throw new Error('a stored token without an AccessorID');
}
await it.close();
await db.close();
const loadMs = performance.now() - t0;
global.gc?.();
global.gc?.();
const m1 = process.memoryUsage();
const n = tokens.size;

// Secrets to look up: every 97th token's, in table order (cold), and 1,000 of them over and over (hot).
const secrets: string[] = [];
let i = 0;
for (const t of tokens.values()) if (i++ % 97 === 0) secrets.push(t.SecretID);
const time = (list: string[], rounds: number) => {
  const start = performance.now();
  let found = 0;
  for (let r = 0; r < rounds; r++) for (const s of list) if (tokens.byUnique('secret', s) !== undefined) found++;
  if (found !== list.length * rounds) throw new Error(`found ${found} of ${list.length * rounds}`);
  return Math.round(((performance.now() - start) * 1e6) / (list.length * rounds));
};
const cold = time(secrets.slice(1_000), 1);
const hotSet = secrets.slice(0, 1_000);
time(hotSet, 1);
const hot = time(hotSet, 20);
console.log(
  JSON.stringify({
    tokens: n,
    loadMs: Math.round(loadMs),
    heapPerToken: Math.round((m1.heapUsed - m0.heapUsed) / n),
    arrayBuffersPerToken: Math.round((m1.arrayBuffers - m0.arrayBuffers) / n),
    rssPerToken: Math.round((m1.rss - m0.rss) / n),
    tableBytesPerToken: Math.round(tokens.bytes / n),
    bySecretColdNs: cold,
    bySecretHotNs: hot,
  }),
);
