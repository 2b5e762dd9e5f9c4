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
import { CHUNK_BYTES, CHUNK_RECORDS, IN_FLIGHT, STOP, type ScanChunk, type ScanRequest } from './scan-protocol.js';

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
    let ends = new Uint32Array(CHUNK_RECORDS);
    let starts = new Int32Array(CHUNK_RECORDS * k);
    let n = 0;
    let records = 0;
    const send = (): void => {
      if (n === 0) return;
      // At most 4 chunks the main thread has not taken yet: the rest wait here, not in memory there.
      while (Atomics.load(control, IN_FLIGHT) >= 4 && Atomics.load(control, STOP) === 0) Atomics.wait(control, IN_FLIGHT, 4, 100);
      Atomics.add(control, IN_FLIGHT, 1);
      const e = ends.subarray(0, n);
      const s = starts.subarray(0, n * k);
      const chunk: ScanChunk = { kind: 'chunk', bytes, ends: e, starts: s };
      port.postMessage(chunk, [bytes.buffer as ArrayBuffer, ends.buffer as ArrayBuffer, starts.buffer as ArrayBuffer]);
      bytes = new Uint8Array(CHUNK_BYTES);
      ends = new Uint32Array(CHUNK_RECORDS);
      starts = new Int32Array(CHUNK_RECORDS * k);
      used = 0;
      n = 0;
    };
    let next: Promise<Uint8Array[]> = values.nextv(10_000);
    try {
      for (let batch = await next; batch.length > 0; batch = await next) {
        next = values.nextv(10_000);
        if (Atomics.load(control, STOP) !== 0) break;
        for (const v of batch) {
          if (n === CHUNK_RECORDS) send();
          // Written in place; a record that does not fit starts the next chunk (one larger than a chunk, alone).
          let end = positional.keepInto(v, bytes, used);
          if (end === -2) {
            send();
            end = positional.keepInto(v, bytes, used);
            if (end === -2) {
              bytes = new Uint8Array(v.length * 2 + 64);
              end = positional.keepInto(v, bytes, used);
            }
          }
          if (end < 0) {
            port.postMessage({ kind: 'fallback', why: `record ${records + 1} is not in the form a compact table keeps` });
            return;
          }
          const out = positional.outStarts;
          const base = n * k;
          // From the record's start (-1: absent).
          for (let i = 0; i < k; i++) starts[base + i] = out[wanted[i] as number] as number;
          ends[n++] = end;
          used = end;
          records++;
        }
      }
      send();
    } finally {
      // A read still running (the main thread said stop): let it end before closing.
      await next.catch(() => undefined);
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
