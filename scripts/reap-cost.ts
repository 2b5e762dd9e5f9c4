/**
 * `npx tsx scripts/reap-cost.ts [N]`: what the reaper costs per token with nothing else running.
 * Seeds N tokens (default 200,000) expiring within a minute, opens the store, and reaps them all
 * at once with a clock set past their expiry. Prints the wall time, the CPU time (this process's,
 * LevelDB's threads included) and the CPU per token. Run it pinned to one core
 * (`taskset -c 1 npx tsx scripts/reap-cost.ts`) and with `node --cpu-prof` to see where it goes.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seedTo } from './bench-seed.js';
import { LevelStore } from '../src/store/level-store.js';
import { Reaper } from '../src/reaper/reaper.js';
const N = Number(process.argv[2] ?? 200000);
const dir = await mkdtemp(join(tmpdir(), 'reap-'));
const t0 = Date.now() + 60_000;
await seedTo(join(dir, 'store'), 0, N, { expires: (i) => new Date(t0 + (i * 60000) / N).toISOString() });
const store = await LevelStore.open(join(dir, 'store'), { durability: 'fsync', changeLog: true });
const clock = { now: () => t0 + 120_000 };
const reaper = new Reaper(store, clock, { interval: 1e9, isPrimary: () => true });
const cpu0 = process.cpuUsage(); const w0 = performance.now();
const n = await reaper.reapOnce();
const cpu = process.cpuUsage(cpu0); const w = performance.now() - w0;
console.log(`reaped ${n} in ${(w / 1000).toFixed(2)} s wall, ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s CPU: ${((cpu.user + cpu.system) / n).toFixed(1)} µs CPU per token, ${(n / (w / 1000)).toFixed(0)}/s`);
await store.close();
