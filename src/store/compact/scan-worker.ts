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

/**
 * The chunks being filled and sent: records in the positional form packed end to end, where each
 * indexed field's value starts, and (when keyed here) their keys and times.
 */
class Chunks {
  private readonly positional = new Positional(request.fields);
  private readonly keyer = new Keyer();
  private readonly wanted = Int32Array.from(request.wanted);
  private bytes = new Uint8Array(CHUNK_BYTES);
  private used = 0;
  private ends = new Uint32Array(CHUNK_RECORDS);
  private starts = new Int32Array(CHUNK_RECORDS * request.wanted.length);
  private keyEnds = new Uint32Array(CHUNK_RECORDS);
  private times = new Float64Array(CHUNK_RECORDS);
  private n = 0;
  records = 0;
  /**
   * Whether this chunk's records are keyed here: while the main thread has chunks waiting (it is
   * the slower), else it keys them itself (this thread is): the two share the work as they can.
   */
  private keying = request.keying === 'always';

  /** Adds a stored record: why not when it is not in a form the table keeps (the scan then falls back). */
  add(v: Uint8Array): string | undefined {
    const { positional, keyer, wanted } = this;
    if (this.n === CHUNK_RECORDS) this.send();
    // Written in place; a record that does not fit starts the next chunk (one larger than a chunk, alone).
    let end = positional.keepInto(v, this.bytes, this.used);
    if (end === -2) {
      this.send();
      end = positional.keepInto(v, this.bytes, this.used);
      if (end === -2) {
        this.bytes = new Uint8Array(v.length * 2 + 64);
        end = positional.keepInto(v, this.bytes, this.used);
      }
    }
    if (end < 0) return `record ${this.records + 1} is not in the form a compact table keeps`;
    const out = positional.outStarts;
    const n = this.n;
    if (this.keying) {
      const time = keyer.record(this.bytes, this.used, out);
      if (time === undefined) return `record ${this.records + 1} is not as its indexes expect`;
      this.times[n] = time;
      this.keyEnds[n] = keyer.used;
    }
    const k = wanted.length;
    // From the record's start (-1: absent).
    for (let i = 0; i < k; i++) this.starts[n * k + i] = out[wanted[i] as number] as number;
    this.ends[n] = end;
    this.n++;
    this.used = end;
    this.records++;
    return undefined;
  }

  /** Sends the chunk filled so far (its buffers go with it) and starts the next. */
  send(): void {
    const { n } = this;
    if (n === 0) return;
    // At most 4 chunks the main thread has not taken yet: the rest wait here, not in memory there.
    while (Atomics.load(control, IN_FLIGHT) >= 4 && Atomics.load(control, STOP) === 0) Atomics.wait(control, IN_FLIGHT, 4, 100);
    Atomics.add(control, IN_FLIGHT, 1);
    const { keys, newKeys } = this.keyer.take();
    const k = this.wanted.length;
    const chunk: ScanChunk = {
      kind: 'chunk',
      keyed: this.keying,
      bytes: this.bytes,
      ends: this.ends.subarray(0, n),
      starts: this.starts.subarray(0, n * k),
      keys,
      keyEnds: this.keyEnds.subarray(0, n),
      newKeys,
      times: this.times.subarray(0, n),
    };
    port.postMessage(
      chunk,
      [this.bytes, this.ends, this.starts, keys, this.keyEnds, this.times].map((a) => a.buffer as ArrayBuffer),
    );
    this.bytes = new Uint8Array(CHUNK_BYTES);
    this.ends = new Uint32Array(CHUNK_RECORDS);
    this.starts = new Int32Array(CHUNK_RECORDS * k);
    this.keyEnds = new Uint32Array(CHUNK_RECORDS);
    this.times = new Float64Array(CHUNK_RECORDS);
    this.used = 0;
    this.n = 0;
    this.keying = request.keying === 'auto' ? Atomics.load(control, IN_FLIGHT) > 1 : request.keying === 'always';
  }
}

async function scan(): Promise<void> {
  const db = new Level<string, Uint8Array>(request.dir, LEVEL_OPTIONS);
  await db.open();
  try {
    const chunks = new Chunks();
    const values = db.values({ gte: request.gte, lt: request.lt, highWaterMarkBytes: 8 * 1024 * 1024 });
    let next: Promise<Uint8Array[]> = values.nextv(10_000);
    try {
      for (let batch = await next; batch.length > 0; batch = await next) {
        next = values.nextv(10_000);
        if (Atomics.load(control, STOP) !== 0) break;
        for (const v of batch) {
          const why = chunks.add(v);
          if (why !== undefined) {
            port.postMessage({ kind: 'fallback', why });
            return;
          }
        }
      }
      chunks.send();
    } finally {
      // A read still running (the main thread said stop): let it end before closing.
      await next.catch(() => undefined);
      await values.close();
    }
    port.postMessage({ kind: 'done', records: chunks.records });
  } finally {
    // Closed before the thread ends, always: the main thread opens the same LevelDB next.
    await db.close();
  }
}

scan().then(
  () => port.postMessage({ kind: 'closed' }),
  (err: unknown) => port.postMessage({ kind: 'closed', error: (err as Error)?.message ?? String(err) }),
);
