import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { startThread } from '../../threads.js';
import type { CompactLoader, KeyedRecord } from '../table.js';
import { IN_FLIGHT, STOP, type ScanChunk, type ScanKeying, type ScanMessage, type ScanRequest } from './scan-protocol.js';

/**
 * A table's records read from LevelDB by a worker thread (scan-worker.ts), put in the positional
 * form and keyed there, and indexed here as they arrive: on two cores, LevelDB's hand-over, the
 * positional form and reading each record's index keys run beside the indexing instead of
 * before it; this thread fills the ID tables and adds slots to the sets the keys name. The LevelDB at `dir` must be closed in this thread meanwhile
 * (the worker opens it; LevelDB allows one open per process), and is closed by the worker
 * before this resolves.
 *
 * Resolves undefined once `table` holds every record; otherwise with why not (one processor, no
 * worker script, a record not in the usual form or failing its check, a read error): `table`
 * may then hold some records and is to be dropped, and the table scanned as before (which
 * reports a corrupt record as it always has).
 */
export async function scanInWorker(
  dir: string,
  range: { gte: string; lt: string },
  table: CompactLoader,
  keying: ScanKeying = 'auto',
): Promise<string | undefined> {
  if (availableParallelism() < 2) return 'one processor';
  const control = new SharedArrayBuffer(8);
  const counters = new Int32Array(control);
  const wanted = [...table.loadFieldPositions];
  const worker = startWorker({ dir, ...range, table: 'tokens', keying, fields: table.fields, wanted, control });
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
    // The members of each key the worker numbered, by its number.
    const sets: Array<{ add(slot: number): void }> = [];
    const keyed: KeyedRecord = { keys: new Int32Array(0), keyFrom: 0, keyTo: 0, sets, time: 0 };
    const load = (m: ScanChunk): void => {
      // The chunk becomes the table's own: its records are not copied again.
      const chunk = table.adoptChunk(Buffer.from(m.bytes.buffer, m.bytes.byteOffset, m.bytes.byteLength));
      for (let i = 0; i < m.newKeys.length; i += 2) sets.push(table.keySet(m.newKeys[i] as number, m.newKeys[i + 1] as string));
      keyed.keys = m.keys;
      keyed.keyTo = 0;
      let start = 0;
      for (let i = 0; i < m.ends.length; i++) {
        const end = m.ends[i] as number;
        keyed.keyFrom = keyed.keyTo;
        keyed.keyTo = m.keyEnds[i] as number;
        keyed.time = m.times[i] as number;
        if (
          !(m.keyed
            ? table.loadKeyed(chunk, start, end - start, m.starts, i * k, keyed)
            : table.loadPositional(chunk, start, end - start, m.starts, i * k))
        ) {
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
