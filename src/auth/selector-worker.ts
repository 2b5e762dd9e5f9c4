/**
 * The selector thread (selectors.ts starts it): compiles binding-rule regular expressions with
 * RE2 semantics (re2js, as Consul's bexpr uses Go's regexp: linear in the input, no
 * look-around or back-references) and evaluates selectors that hold them. Each pattern and
 * each selector text is compiled once and kept (a bounded cache): a rule version costs its
 * compile once per thread, not once per login. The main thread bounds each request in time and
 * ends this thread when one overruns.
 */
import { parentPort } from 'node:worker_threads';
import { RE2JS } from 're2js';
import { type Pattern, type SelectorNode, parseSelector, selects } from '../domain/selector.js';
import type { SelectorAnswer, SelectorRequest } from './selector-protocol.js';

if (parentPort === null) throw new Error('selector-worker runs as a worker thread');
const port = parentPort;

const CACHE = 2_000;
const patterns = new Map<string, RE2JS | Error>();
const selectors = new Map<string, SelectorNode | null | undefined>();

function remember<K, V>(map: Map<K, V>, key: K, value: V): V {
  if (map.size >= CACHE) map.delete(map.keys().next().value as K);
  map.set(key, value);
  return value;
}

function compiled(source: string): RE2JS | Error {
  const hit = patterns.get(source);
  if (hit !== undefined) return hit;
  let out: RE2JS | Error;
  try {
    out = RE2JS.compile(source);
  } catch (err) {
    out = err instanceof Error ? err : new Error(String(err));
  }
  return remember(patterns, source, out);
}

/** A pattern that does not compile matches nothing (writes refuse it; a stored one grants nothing). */
const NEVER: Pattern = { test: () => false };

function patternOf(source: string): Pattern {
  const p = compiled(source);
  return p instanceof Error ? NEVER : p;
}

function parsed(text: string): SelectorNode | null | undefined {
  if (selectors.has(text)) return selectors.get(text);
  let node: SelectorNode | null | undefined;
  try {
    node = text.trim() === '' ? null : parseSelector(text);
  } catch {
    node = undefined;
  }
  return remember(selectors, text, node);
}

function answer(req: SelectorRequest): SelectorAnswer {
  if (req.kind === 'compile') {
    return {
      id: req.id,
      sizes: req.patterns.map((source) => {
        const p = compiled(source);
        return p instanceof Error ? { error: p.message } : p.programSize();
      }),
    };
  }
  return { id: req.id, matched: req.selectors.map((text) => selects(parsed(text), req.data, patternOf)) };
}

port.on('message', (req: SelectorRequest) => {
  let out: SelectorAnswer;
  try {
    out = answer(req);
  } catch (err) {
    out = { id: req.id, error: err instanceof Error ? err.message : String(err) };
  }
  port.postMessage(out);
});
