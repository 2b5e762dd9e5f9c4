import type { Worker } from 'node:worker_threads';
import { type SelectorNode, SelectorError, clauseCount, parseSelector, selectorPatterns, selects } from '../domain/selector.js';
import { startThread } from '../threads.js';
import type { CompileRequest, MatchRequest, SelectorAnswer, SelectorRequest } from './selector-protocol.js';

/** Instructions the regular expressions of one selector may compile to, all its `matches` clauses together. */
export const MAX_SELECTOR_PROGRAM = 1_000;
/** Longest a login's selectors (or a write's compile) may take in the selector thread. */
export const SELECTOR_DEADLINE_MS = 2_000;
/** Selector text parsed on the event loop per login, at most: beyond it the thread parses. */
const PARSE_BUDGET_CHARS = 64 * 1024;
/** Clauses × the claims' size evaluated on the event loop, at most (a few milliseconds' work). */
const INLINE_UNITS = 2_000_000;
const CACHE = 2_000;

/** The selector thread did not answer in time, or failed: the login is refused, never decided by guess. */
export class SelectorTimeout extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SelectorTimeout';
  }
}

/**
 * Binding-rule selectors as a daemon evaluates them (docs/security.md, "Security"). No login may hold the
 * event loop: a selector is parsed once per text and kept; one without regular expressions is
 * evaluated on the event loop when the work is small (clauses × the size of the claims); any
 * `matches` clause, and any large work, goes to one worker thread that compiles each pattern once
 * (RE2, linear time) and answers within a deadline, or is ended and started again.
 * At write time a selector's patterns are compiled there too, and their program size bounded.
 */
export class Selectors {
  private readonly parsed = new Map<string, SelectorNode | null | undefined>();
  private worker: Worker | undefined;
  private readonly pending = new Map<number, { resolve: (a: SelectorAnswer) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  private nextID = 1;
  private closed = false;

  constructor(private readonly options: { deadlineMs?: number; maxProgram?: number } = {}) {}

  private get deadline(): number {
    return this.options.deadlineMs ?? SELECTOR_DEADLINE_MS;
  }

  /**
   * A selector as a write gives it: the grammar (SelectorError with its column), then every
   * `matches` pattern compiled in the thread, each valid and all together at most
   * MAX_SELECTOR_PROGRAM instructions. The error names the clause.
   */
  async check(text: string): Promise<void> {
    if (text.trim() === '') return;
    const node = parseSelector(text);
    const clauses = selectorPatterns(node);
    if (clauses.length === 0) return;
    let answer: SelectorAnswer;
    try {
      answer = await this.ask({ kind: 'compile', patterns: clauses.map((c) => c.value) });
    } catch (err) {
      if (err instanceof SelectorTimeout)
        throw new SelectorError(`the regular expressions take longer than ${this.deadline} ms to compile; make them smaller`);
      throw err;
    }
    if (!('sizes' in answer)) throw new Error(`the selector thread failed: ${'error' in answer ? answer.error : 'no answer'}`);
    const max = this.options.maxProgram ?? MAX_SELECTOR_PROGRAM;
    let total = 0;
    for (let i = 0; i < clauses.length; i++) {
      const c = clauses[i] as (typeof clauses)[number];
      const size = answer.sizes[i];
      const name = `clause ${c.clause} (${c.path.join('.')} matches ${JSON.stringify(shorten(c.value))})`;
      if (typeof size !== 'number')
        throw new SelectorError(`${name}: invalid regular expression: ${size?.error ?? 'unknown error'}`, c.column);
      total += size;
      if (total > max)
        throw new SelectorError(
          `${name} compiles to ${size} instructions, ${total} with the clauses before it; a selector's regular expressions may ` +
            `compile to at most ${max} in all`,
          c.column,
        );
    }
  }

  /**
   * Which of `selectors` select `data`, in order: an empty selector selects everything, one
   * that does not parse or evaluate nothing. Synchronous when the event loop may do the work;
   * rejects with SelectorTimeout when the thread cannot answer within the deadline.
   */
  match(selectors: readonly string[], data: unknown): boolean[] | Promise<boolean[]> {
    const nodes: Array<SelectorNode | null | undefined> = [];
    let parseBudget = PARSE_BUDGET_CHARS;
    let clauses = 0;
    let inline = true;
    for (const text of selectors) {
      let node = this.parsed.get(text);
      if (node === undefined && !this.parsed.has(text)) {
        if (text.length > parseBudget) {
          inline = false;
          continue;
        }
        parseBudget -= text.length;
        node = this.parse(text);
      }
      nodes.push(node);
      if (node) {
        if (selectorPatterns(node).length > 0) inline = false;
        clauses += clauseCount(node);
      }
    }
    if (inline && clauses * weightOf(data) <= INLINE_UNITS) return nodes.map((n) => selects(n, data, () => ({ test: () => false })));
    return this.ask({ kind: 'match', selectors: [...selectors], data }).then((a) => {
      if ('matched' in a) return a.matched;
      throw new Error(`the selector thread failed: ${'error' in a ? a.error : 'no answer'}`);
    });
  }

  /** Ends the thread. */
  async close(): Promise<void> {
    this.closed = true;
    const w = this.worker;
    this.worker = undefined;
    this.failPending(new SelectorTimeout('the daemon is stopping'));
    await w?.terminate();
  }

  private parse(text: string): SelectorNode | null | undefined {
    let node: SelectorNode | null | undefined;
    try {
      node = text.trim() === '' ? null : parseSelector(text);
    } catch {
      node = undefined;
    }
    if (this.parsed.size >= CACHE) this.parsed.delete(this.parsed.keys().next().value as string);
    this.parsed.set(text, node);
    return node;
  }

  private ask(req: Omit<CompileRequest, 'id'> | Omit<MatchRequest, 'id'>): Promise<SelectorAnswer> {
    if (this.closed) return Promise.reject(new SelectorTimeout('the daemon is stopping'));
    const worker = this.thread();
    const id = this.nextID++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        // The request overran: the thread is ended (whatever it was doing), and what waited on it fails.
        const w = this.worker;
        this.worker = undefined;
        this.failPending(new SelectorTimeout(`binding rules took longer than ${this.deadline} ms to evaluate`));
        void w?.terminate();
      }, this.deadline);
      this.pending.set(id, { resolve, reject, timer });
      worker.postMessage({ ...req, id } as SelectorRequest);
    });
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const w = startThread(import.meta.url, 'selector-worker');
    if (w === undefined) throw new Error('the selector thread (selector-worker) is missing from this build');
    w.unref();
    w.on('message', (a: SelectorAnswer) => {
      const p = this.pending.get(a.id);
      if (p === undefined) return;
      this.pending.delete(a.id);
      clearTimeout(p.timer);
      p.resolve(a);
    });
    const gone = (why: string) => {
      if (this.worker !== w) return;
      this.worker = undefined;
      this.failPending(new SelectorTimeout(why));
    };
    w.on('error', (err) => gone(`the selector thread failed: ${err.message}`));
    w.on('exit', () => gone('the selector thread ended'));
    this.worker = w;
    return w;
  }

  private failPending(err: Error): void {
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
  }
}

/** A bound on what evaluating one clause over `data` reads: its strings' length, lists' and maps' entries. */
function weightOf(data: unknown, depth = 0): number {
  if (typeof data === 'string') return data.length;
  if (data === null || typeof data !== 'object' || depth > 16) return 1;
  let w = 1;
  for (const v of Array.isArray(data) ? data : Object.values(data)) w += weightOf(v, depth + 1);
  return w;
}

const shorten = (s: string): string => (s.length > 64 ? `${s.slice(0, 61)}...` : s);
