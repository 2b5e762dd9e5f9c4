/**
 * `npx tsx scripts/heap-compare.ts BEFORE.heapsnapshot AFTER.heapsnapshot [TOP]`: two V8 heap snapshots of
 * one daemon (`npm run bench:churn` writes them with CHURN_HEAP_DIR) compared by what holds their bytes.
 *
 * Each object's bytes are charged to its retainer: the nearest object of a class of our own (or of a
 * library's) on its shortest path from the roots, with the property it is held by (`LogTail.bytes`). A
 * structure that grows between the two shows as a retainer whose bytes grow; one that is bounded and full
 * shows the same in both. Printed: the TOP (default 25) retainers by the larger of the two, then the TOP
 * constructors, each with both sizes and the change.
 */
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] }; node_count: number };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** Classes whose instances hold things for others: charging bytes to them would say nothing. */
const CONTAINERS = new Set([
  'Object',
  'Array',
  'Map',
  'Set',
  'WeakMap',
  'WeakSet',
  'Buffer',
  'Uint8Array',
  'Uint32Array',
  'Int32Array',
  'Float64Array',
  'ArrayBuffer',
  'DataView',
  'Promise',
  'Function',
  'Error',
  'Date',
  'RegExp',
  'FastBuffer',
  'Generator',
  'AsyncFunction',
  'AsyncGenerator',
  'Module',
  'ModuleWrap',
]);

interface Usage {
  byRetainer: Map<string, number>;
  byConstructor: Map<string, number>;
  total: number;
}

function usage(file: string): Usage {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const { meta } = snap.snapshot;
  const NF = meta.node_fields.length;
  const EF = meta.edge_fields.length;
  const nType = meta.node_fields.indexOf('type');
  const nName = meta.node_fields.indexOf('name');
  const nSize = meta.node_fields.indexOf('self_size');
  const nEdges = meta.node_fields.indexOf('edge_count');
  const eType = meta.edge_fields.indexOf('type');
  const eName = meta.edge_fields.indexOf('name_or_index');
  const eTo = meta.edge_fields.indexOf('to_node');
  const nodeTypes = meta.node_types[0];
  const edgeTypes = meta.edge_types[0];
  const { nodes, edges, strings } = snap;
  const count = nodes.length / NF;
  const firstEdge = new Uint32Array(count + 1);
  for (let i = 0, e = 0; i < count; i++) {
    firstEdge[i] = e;
    e += (nodes[i * NF + nEdges] as number) * EF;
    firstEdge[i + 1] = e;
  }
  const typeOf = (i: number) => nodeTypes[nodes[i * NF + nType] as number] as string;
  const nameOf = (i: number) => strings[nodes[i * NF + nName] as number] as string;
  const isOwner = (i: number) => typeOf(i) === 'object' && /^[A-Z_]/.test(nameOf(i)) && !CONTAINERS.has(nameOf(i)) && !nameOf(i).startsWith('system');
  // Breadth first from the root: the shortest path to each object, and its label from its parent's.
  const label: Array<string | undefined> = new Array(count);
  label[0] = '(roots)';
  const queue = new Uint32Array(count);
  let head = 0;
  let tail = 0;
  queue[tail++] = 0;
  while (head < tail) {
    const i = queue[head++] as number;
    for (let e = firstEdge[i] as number; e < (firstEdge[i + 1] as number); e += EF) {
      const kind = edgeTypes[edges[e + eType] as number];
      if (kind === 'weak' || kind === 'shortcut') continue;
      const j = (edges[e + eTo] as number) / NF;
      if (label[j] !== undefined) continue;
      const raw = edges[e + eName] as number;
      // A WeakMap's entries are named by their key and value: the map is what holds them.
      const edgeName = kind === 'element' || kind === 'hidden' ? '[]' : String(strings[raw]).split(' / ')[0];
      label[j] = isOwner(i) ? `${nameOf(i)}.${edgeName}` : (label[i] as string);
      queue[tail++] = j;
    }
  }
  // An object the shortest path reaches through something of no class of ours (a generator's context, a
  // module) is charged, where it can be, to another retainer that is one: twice over the same order, so
  // that what such an object holds follows it.
  for (let pass = 0; pass < 2; pass++)
    for (let q = 0; q < tail; q++) {
      const i = queue[q] as number;
      const from = isOwner(i) ? undefined : label[i];
      if (from !== undefined && from.startsWith('(roots)')) continue;
      for (let e = firstEdge[i] as number; e < (firstEdge[i + 1] as number); e += EF) {
        const kind = edgeTypes[edges[e + eType] as number];
        if (kind === 'weak' || kind === 'shortcut') continue;
        const j = (edges[e + eTo] as number) / NF;
        if (!(label[j] as string).startsWith('(roots)')) continue;
        const edgeName = kind === 'element' || kind === 'hidden' ? '[]' : String(strings[edges[e + eName] as number]).split(' / ')[0];
        label[j] = from ?? `${nameOf(i)}.${edgeName}`;
      }
    }
  const byRetainer = new Map<string, number>();
  const byConstructor = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < count; i++) {
    const size = nodes[i * NF + nSize] as number;
    total += size;
    const held = label[i] ?? '(unreachable)';
    byRetainer.set(held, (byRetainer.get(held) ?? 0) + size);
    const ctor = typeOf(i) === 'object' || typeOf(i) === 'native' ? nameOf(i) : `(${typeOf(i)})`;
    byConstructor.set(ctor, (byConstructor.get(ctor) ?? 0) + size);
  }
  return { byRetainer, byConstructor, total };
}

const [beforeFile, afterFile, topArg] = process.argv.slice(2);
if (beforeFile === undefined || afterFile === undefined) {
  process.stderr.write('usage: npx tsx scripts/heap-compare.ts BEFORE.heapsnapshot AFTER.heapsnapshot [TOP]\n');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const before = usage(beforeFile);
const after = usage(afterFile);
const mb = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MB`;
const table = (title: string, a: Map<string, number>, b: Map<string, number>) => {
  const keys = [...new Set([...a.keys(), ...b.keys()])].sort((x, y) => Math.max(b.get(y) ?? 0, a.get(y) ?? 0) - Math.max(b.get(x) ?? 0, a.get(x) ?? 0));
  process.stdout.write(`\n${title}\n| held by | before | after | change |\n|---|---|---|---|\n`);
  for (const k of keys.slice(0, top)) {
    const x = a.get(k) ?? 0;
    const y = b.get(k) ?? 0;
    process.stdout.write(`| ${k.replaceAll('|', '\\|')} | ${mb(x)} | ${mb(y)} | ${y >= x ? '+' : '-'}${mb(Math.abs(y - x))} |\n`);
  }
};
process.stdout.write(`heap (self sizes): ${mb(before.total)} -> ${mb(after.total)}\n`);
table(`largest retainers (the nearest object of a class, and the property it holds them by)`, before.byRetainer, after.byRetainer);
table(`largest constructors`, before.byConstructor, after.byConstructor);
