/**
 * The worker thread of a parallel scan (parallel-scan.ts): reads one table's records from
 * LevelDB, puts each in the positional form, and sends them to the main thread packed in
 * chunks, with where each indexed field's value starts. LevelDB handing over each value as
 * a Buffer of its own and the positional form were half of a start's main thread; here they
 * run beside the main thread's indexing. A record it cannot put in the positional form
 * stops it (`fallback`): the main thread then scans the table itself, as it always did.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Level } from 'level';
import { LEVEL_OPTIONS } from '../level-options.js';
import { Positional } from './positional.js';
import { type ScanChunk, type ScanRequest, CHUNK_BYTES, IN_FLIGHT, STOP } from './scan-protocol.js';

const request = workerData as ScanRequest;
if (parentPort === null) throw new Error('scan-worker runs as a worker thread');
const port = parentPort;
const control = new Int32Array(request.control);

async function scan(): Promise<void> {
  const db = new Level<string, Uint8Array>(request.dir, LEVEL_OPTIONS);
  await db.open();
  try {
    const positional = new Positional(request.fields);
    const wanted = Int32Array.from(request.wanted);
    const k = wanted.length;
    const values = db.values({ gte: request.gte, lt: request.lt, highWaterMarkBytes: 8 * 1024 * 1024 });
    let bytes = new Uint8Array(CHUNK_BYTES);
    let used = 0;
    let ends: number[] = [];
    let starts: number[] = [];
    let records = 0;
    const send = (): void => {
      if (ends.length === 0) return;
      // At most IN_FLIGHT chunks the main thread has not taken yet: the rest wait here, not in memory there.
      while (Atomics.load(control, IN_FLIGHT) >= 4 && Atomics.load(control, STOP) === 0) Atomics.wait(control, IN_FLIGHT, 4, 100);
      Atomics.add(control, IN_FLIGHT, 1);
      const e = Uint32Array.from(ends);
      const s = Int32Array.from(starts);
      const chunk: ScanChunk = { kind: 'chunk', bytes, ends: e, starts: s };
      port.postMessage(chunk, [bytes.buffer as ArrayBuffer, e.buffer as ArrayBuffer, s.buffer as ArrayBuffer]);
      bytes = new Uint8Array(CHUNK_BYTES);
      used = 0;
      ends = [];
      starts = [];
    };
    try {
      let next = values.nextv(10_000);
      for (let batch = await next; batch.length > 0; batch = await next) {
        next = values.nextv(10_000);
        if (Atomics.load(control, STOP) !== 0) break;
        for (const v of batch) {
          const kept = positional.fromMap(v);
          if (kept === undefined) {
            port.postMessage({ kind: 'fallback', why: `record ${records + 1} is not in the form a compact table keeps` });
            return;
          }
          if (used + kept.length > bytes.length) {
            send();
            if (kept.length > bytes.length) bytes = new Uint8Array(kept.length);
          }
          bytes.set(kept, used);
          used += kept.length;
          ends.push(used);
          const out = positional.outStarts;
          for (let i = 0; i < k; i++) starts.push(out[wanted[i] as number] as number);
          records++;
        }
      }
      send();
      await next.catch(() => undefined);
    } finally {
      await values.close();
    }
    port.postMessage({ kind: 'done', records });
  } finally {
    // Closed before the thread ends, always: the main thread opens the same LevelDB next.
    await db.close();
  }
}

scan().then(
  () => port.postMessage({ kind: 'closed' }),
  (err: unknown) => port.postMessage({ kind: 'closed', error: (err as Error)?.message ?? String(err) }),
);
