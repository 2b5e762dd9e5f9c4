/**
 * `npx tsx scripts/store-sizes.ts DATA_DIR/store`: the keys and bytes a stored data dir holds
 * by key prefix (t tokens, p policies, r roles, l the change log, u last uses, m metadata), read
 * with the daemon stopped.
 */
import { Level } from 'level';
const db = new Level<string, Uint8Array>(process.argv[2] as string, { keyEncoding: 'utf8', valueEncoding: 'view' });
await db.open();
const sums = new Map<string, [number, number]>();
for await (const [k, v] of db.iterator()) {
  const p = k.split('\u0000')[0] as string;
  const e = sums.get(p) ?? [0, 0];
  e[0]++; e[1] += k.length + v.length;
  sums.set(p, e);
}
for (const [p, [n, b]] of sums) console.log(p, n, (b / 1024 / 1024).toFixed(1), 'MB');
await db.close();
