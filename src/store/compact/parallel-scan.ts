import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { startThread } from '../../threads.js';
import type { CompactLoader } from '../table.js';
import { IN_FLIGHT, STOP, type ScanChunk, type ScanMessage, type ScanRequest } from './scan-protocol.js';

/**
 * A table's records read from LevelDB by a worker thread (scan-worker.ts) and indexed here as
 * they arrive: on two cores, LevelDB's hand-over and the positional form run beside the
 * indexing instead of before it. The LevelDB at `dir` must be closed in this thread meanwhile
 * (the worker opens it; LevelDB allows one open per process), and is closed by the worker
 * before this resolves.
 *
 * Resolves undefined once `table` holds every record; otherwise with why not (one processor, no
 * worker script, a record not in the usual form or failing its check, a read error): `table`
 * may then hold some records and is to be dropped, and the table scanned as before (which
 * reports a corrupt record as it always has).
 */
export async function scanInWorker(dir: string, range: { gte: string; lt: string }, table: CompactLoader): Promise<string | undefined> {
  if (availableParallelism() < 2) return 'one processor';
  const control = new SharedArrayBuffer(8);
  const counters = new Int32Array(control);
  const wanted = [...table.loadFieldPositions];
  const worker = startWorker({ dir, ...range, fields: table.fields, wanted, control });
  if (worker === undefined) return 'no scan worker script beside the store';
  const k = wanted.length;
  return new Promise((resolve) => {
    let why: string | undefined;
    let done = false;
    let closed = false;
    const stop = (reason: string): void => {
      why ??= reason;
      Atomics.store(counters, STOP, 1);
      Atomics.notify(counters, IN_FLIGHT);
    };
    const load = (m: ScanChunk): void => {
      // The chunk becomes the table's own: its records are not copied again.
      const chunk = table.adoptChunk(Buffer.from(m.bytes.buffer, m.bytes.byteOffset, m.bytes.byteLength));
      let start = 0;
      for (let i = 0; i < m.ends.length; i++) {
        const end = m.ends[i] as number;
        if (!table.loadPositional(chunk, start, end - start, m.starts, i * k)) {
          stop(`record ${table.size + 1} failed its check`);
          return;
        }
        start = end;
      }
    };
    worker.on('message', (m: ScanMessage) => {
      if (m.kind === 'chunk') {
        try {
          if (why === undefined) load(m);
        } catch (err) {
          // Thrown here, it would end the process; the scan on this thread reports it as it always has.
          stop(`record ${table.size + 1}: ${(err as Error).message}`);
        }
        Atomics.sub(counters, IN_FLIGHT, 1);
        Atomics.notify(counters, IN_FLIGHT);
      } else if (m.kind === 'fallback') stop(m.why);
      else if (m.kind === 'done') done = true;
      else {
        closed = true;
        if (m.error !== undefined) stop(`the scan failed: ${m.error}`);
      }
    });
    worker.on('error', (err) => stop(`the scan thread failed: ${err.message}`));
    worker.on('exit', () => {
      if (!closed) why ??= 'the scan thread ended before closing LevelDB';
      if (why === undefined && !done) why = 'the scan thread stopped early';
      if (why === undefined) table.finishLoading();
      resolve(why);
    });
  });
}

/** The scan thread, beside this module as it runs (threads.ts); undefined when it is not there. */
function startWorker(request: ScanRequest): Worker | undefined {
  return startThread(import.meta.url, 'scan-worker', { workerData: request });
}
