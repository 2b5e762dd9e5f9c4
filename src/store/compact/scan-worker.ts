/**
 * The worker thread of a parallel scan (parallel-scan.ts): reads one table's records from
 * LevelDB, puts each in the positional form (a copy, when stored so: a store of format 3),
 * and sends them to the main thread packed in chunks, with where each indexed field's value
 * starts. While the main thread is the slower of the two, a chunk's records are also keyed here
 * for the table's non-unique indexes and its time order as the main thread's loader would (each
 * key a number, its string sent once), leaving that thread the ID tables and adding each
 * record's slot to the sets its key numbers name. A record it cannot put in the
 * positional form or key stops it (`fallback`): the main thread then scans the table itself, as
 * it always did (and names a corrupt record).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Level } from 'level';
import { LEVEL_OPTIONS } from '../level-options.js';
import { tokenCodec } from '../memory.js';
import { TABLE_DEFS } from '../schema.js';
import { ValueMemo, readFields } from './msgpack-fields.js';
import { Positional } from './positional.js';
import { CHUNK_BYTES, CHUNK_RECORDS, IN_FLIGHT, STOP, type ScanChunk, type ScanRequest } from './scan-protocol.js';
import { TableParts } from './table-loader.js';

const request = workerData as ScanRequest;
if (parentPort === null) throw new Error('scan-worker runs as a worker thread');
const port = parentPort;
const control = new Int32Array(request.control);

/** Each record's index keys and time, as the main thread's loader (table-loader.ts) reads them. */
class Keyer {
  private readonly parts = new TableParts(TABLE_DEFS[request.table], tokenCodec(0));
  private readonly at: Int32Array;
  private readonly memo = new ValueMemo();
  /** Per non-unique index, its keys' numbers. */
  private readonly numbers: Array<Map<string, number>>;
  private next = 0;
  private index = 0;
  keys = new Int32Array(CHUNK_RECORDS * 8);
  used = 0;
  newKeys: Array<number | string> = [];
  private readonly emit = (k: string): void => {
    const numbers = this.numbers[this.index] as Map<string, number>;
    let n = numbers.get(k);
    if (n === undefined) {
      n = this.next++;
      numbers.set(k, n);
      this.newKeys.push(this.index, k);
    }
    if (this.used === this.keys.length) {
      const wider = new Int32Array(this.keys.length * 2);
      wider.set(this.keys);
      this.keys = wider;
    }
    this.keys[this.used++] = n;
  };

  constructor() {
    this.at = new Int32Array(this.parts.indexFields.length);
    this.numbers = this.parts.multi.map(() => new Map());
    // The main thread's loader must list the same fields and indexes in the same order.
    if (this.parts.fields.join() !== request.fields.join() || this.parts.inFields.join() !== request.wanted.join())
      throw new Error('the scan worker and the table disagree on the fields');
  }

  /**
   * Keys the positional record at `from` of `bytes`, whose field values start at `starts`
   * (from the record's start): its time (NaN: none), or undefined when its fields are not as
   * the indexes expect.
   */
  record(bytes: Uint8Array, from: number, starts: Int32Array): number | undefined {
    const { inFields, indexFields, fromBytes, multi, def, codec } = this.parts;
    const at = this.at;
    for (let i = 0; i < at.length; i++) {
      const p = starts[inFields[i] as number] as number;
      at[i] = p === -1 ? -1 : from + p;
    }
    const fields = readFields(bytes, indexFields, at, codec.decodeValue, fromBytes, this.memo);
    if (fields === undefined) return undefined;
    const mark = this.used;
    try {
      for (let m = 0; m < multi.length; m++) {
        this.index = m;
        (multi[m] as (typeof multi)[number]).keys(fields, this.emit);
      }
      const time = def.orderedBy?.time(fields as never);
      if (time === undefined) return Number.NaN;
      if (Number.isFinite(time)) return time;
    } catch {
      // A field of the wrong shape: below.
    }
    this.used = mark;
    return undefined;
  }

  /** The chunk's keys handed over; the next chunk's start afresh (their numbers go on). */
  take(): { keys: Int32Array; newKeys: Array<number | string> } {
    const out = { keys: this.keys.slice(0, this.used), newKeys: this.newKeys };
    this.used = 0;
    this.newKeys = [];
    return out;
  }
}

async function scan(): Promise<void> {
  const db = new Level<string, Uint8Array>(request.dir, LEVEL_OPTIONS);
  await db.open();
  try {
    const positional = new Positional(request.fields);
    const keyer = new Keyer();
    const wanted = Int32Array.from(request.wanted);
    const k = wanted.length;
    const values = db.values({ gte: request.gte, lt: request.lt, highWaterMarkBytes: 8 * 1024 * 1024 });
    let bytes = new Uint8Array(CHUNK_BYTES);
    let used = 0;
    let ends = new Uint32Array(CHUNK_RECORDS);
    let starts = new Int32Array(CHUNK_RECORDS * k);
    let keyEnds = new Uint32Array(CHUNK_RECORDS);
    let times = new Float64Array(CHUNK_RECORDS);
    let n = 0;
    let records = 0;
    // Whether this chunk's records are keyed here: while the main thread has chunks waiting (it is
    // the slower), else it keys them itself (this thread is): the two share the work as they can.
    let keying = request.keying === 'always';
    const send = (): void => {
      if (n === 0) return;
      // At most 4 chunks the main thread has not taken yet: the rest wait here, not in memory there.
      while (Atomics.load(control, IN_FLIGHT) >= 4 && Atomics.load(control, STOP) === 0) Atomics.wait(control, IN_FLIGHT, 4, 100);
      Atomics.add(control, IN_FLIGHT, 1);
      const { keys, newKeys } = keyer.take();
      const chunk: ScanChunk = {
        kind: 'chunk',
        keyed: keying,
        bytes,
        ends: ends.subarray(0, n),
        starts: starts.subarray(0, n * k),
        keys,
        keyEnds: keyEnds.subarray(0, n),
        newKeys,
        times: times.subarray(0, n),
      };
      port.postMessage(chunk, [
        bytes.buffer as ArrayBuffer,
        ends.buffer as ArrayBuffer,
        starts.buffer as ArrayBuffer,
        keys.buffer as ArrayBuffer,
        keyEnds.buffer as ArrayBuffer,
        times.buffer as ArrayBuffer,
      ]);
      bytes = new Uint8Array(CHUNK_BYTES);
      ends = new Uint32Array(CHUNK_RECORDS);
      starts = new Int32Array(CHUNK_RECORDS * k);
      keyEnds = new Uint32Array(CHUNK_RECORDS);
      times = new Float64Array(CHUNK_RECORDS);
      used = 0;
      n = 0;
      keying = request.keying === 'auto' ? Atomics.load(control, IN_FLIGHT) > 1 : request.keying === 'always';
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
          if (keying) {
            const time = keyer.record(bytes, used, out);
            if (time === undefined) {
              port.postMessage({ kind: 'fallback', why: `record ${records + 1} is not as its indexes expect` });
              return;
            }
            times[n] = time;
            keyEnds[n] = keyer.used;
          }
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
