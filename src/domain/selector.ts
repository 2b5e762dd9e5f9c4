/**
 * Binding-rule selectors: Consul's boolean expression syntax (go-bexpr) over a verified
 * identity, e.g. `value.name == "web" and "admins" in list.groups`.
 *
 *   expr      = or
 *   or        = and ("or" and)*
 *   and       = not ("and" not)*
 *   not       = "not" not | "(" expr ")" | match
 *   match     = selector ("==" | "!=") value
 *             | selector "is" ["not"] "empty"
 *             | selector ["not"] ("contains" | "matches") value
 *             | value ["not"] "in" selector
 *   selector  = ident ("." ident | "[" string "]")*
 *   value     = "string" | `raw string` | number | true | false | ident
 *
 * Semantics follow go-bexpr: `==` compares a selected value's text with the value; `in`
 * and `contains` test membership in a list, a key of a map, or a substring of a string;
 * `matches` is a regular expression search on a string; `is empty` holds for an empty
 * string, list or map. A selector that names nothing makes the whole expression fail
 * to evaluate, which a binding rule treats as no match.
 */

export class SelectorError extends Error {
  constructor(
    message: string,
    /** 1-based column in the selector text, when the problem has a place. */
    readonly column?: number,
  ) {
    super(column === undefined ? message : `${message} (at column ${column})`);
    this.name = 'SelectorError';
  }
}

/** The selected value could not be found: the expression does not evaluate. */
export class SelectorEvalError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SelectorEvalError';
  }
}

export type Path = readonly string[];

export type SelectorNode =
  | { kind: 'or' | 'and'; left: SelectorNode; right: SelectorNode }
  | { kind: 'not'; expr: SelectorNode }
  | { kind: 'eq' | 'ne' | 'contains' | 'notContains'; path: Path; value: string }
  /** `clause`: the 1-based number of this clause among the selector's matching clauses, to name it in messages. */
  | { kind: 'matches' | 'notMatches'; path: Path; value: string; clause: number; column: number }
  | { kind: 'empty' | 'notEmpty'; path: Path };

type Token =
  | { t: 'ident'; v: string; col: number }
  | { t: 'string'; v: string; col: number }
  | { t: 'number'; v: string; col: number }
  | { t: 'op'; v: '==' | '!=' | '(' | ')' | '.' | '[' | ']'; col: number }
  | { t: 'end'; col: number };

const KEYWORDS = new Set(['and', 'or', 'not', 'in', 'is', 'empty', 'contains', 'matches']);
/** Longest accepted selector text: it is parsed on every write of a rule and stored. */
const MAX_LENGTH = 4096;

function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    const col = i + 1;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '=' || c === '!') {
      if (text[i + 1] !== '=') throw new SelectorError(`unexpected "${c}"; did you mean "${c}="?`, col);
      out.push({ t: 'op', v: c === '=' ? '==' : '!=', col });
      i += 2;
    } else if (c === '(' || c === ')' || c === '.' || c === '[' || c === ']') {
      out.push({ t: 'op', v: c, col });
      i++;
    } else if (c === '"') {
      let v = '';
      i++;
      for (;;) {
        if (i >= text.length) throw new SelectorError('unterminated string', col);
        const d = text[i] as string;
        if (d === '"') break;
        if (d === '\\') {
          const e = text[i + 1];
          const escapes: Record<string, string> = { n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\' };
          if (e === undefined || escapes[e] === undefined) throw new SelectorError(`invalid escape "\\${e ?? ''}" in string`, i + 1);
          v += escapes[e];
          i += 2;
          continue;
        }
        v += d;
        i++;
      }
      i++;
      out.push({ t: 'string', v, col });
    } else if (c === '`') {
      const end = text.indexOf('`', i + 1);
      if (end < 0) throw new SelectorError('unterminated raw string', col);
      out.push({ t: 'string', v: text.slice(i + 1, end), col });
      i = end + 1;
    } else if (/[0-9]/.test(c) || (c === '-' && /[0-9]/.test(text[i + 1] ?? ''))) {
      const m = /^-?[0-9]+(\.[0-9]+)?/.exec(text.slice(i)) as RegExpExecArray;
      out.push({ t: 'number', v: m[0], col });
      i += m[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_-]*/.exec(text.slice(i)) as RegExpExecArray;
      out.push({ t: 'ident', v: m[0], col });
      i += m[0].length;
    } else {
      throw new SelectorError(`unexpected character ${JSON.stringify(c)}`, col);
    }
  }
  out.push({ t: 'end', col: text.length + 1 });
  return out;
}

class Parser {
  private at = 0;
  /** Matching clauses met so far (each clause's number in messages). */
  private clauses = 0;
  constructor(private readonly tokens: Token[]) {}

  private peek(offset = 0): Token {
    return this.tokens[Math.min(this.at + offset, this.tokens.length - 1)] as Token;
  }

  private next(): Token {
    const t = this.peek();
    if (t.t !== 'end') this.at++;
    return t;
  }

  private isWord(word: string, offset = 0): boolean {
    const t = this.peek(offset);
    return t.t === 'ident' && t.v === word;
  }

  private isOp(op: string): boolean {
    const t = this.peek();
    return t.t === 'op' && t.v === op;
  }

  private expectWord(word: string): void {
    if (!this.isWord(word)) throw this.unexpected(`"${word}"`);
  }

  private unexpected(wanted: string): SelectorError {
    const t = this.peek();
    const got = t.t === 'end' ? 'the end of the selector' : t.t === 'string' ? JSON.stringify(t.v) : `"${t.v}"`;
    return new SelectorError(`expected ${wanted}, found ${got}`, t.col);
  }

  parse(): SelectorNode {
    const node = this.or();
    if (this.peek().t !== 'end') throw this.unexpected('"and", "or" or the end of the selector');
    return node;
  }

  private or(): SelectorNode {
    let left = this.and();
    while (this.isWord('or')) {
      this.next();
      left = { kind: 'or', left, right: this.and() };
    }
    return left;
  }

  private and(): SelectorNode {
    let left = this.not();
    while (this.isWord('and')) {
      this.next();
      left = { kind: 'and', left, right: this.not() };
    }
    return left;
  }

  private not(): SelectorNode {
    if (this.isWord('not')) {
      this.next();
      return { kind: 'not', expr: this.not() };
    }
    if (this.isOp('(')) {
      this.next();
      const inner = this.or();
      if (!this.isOp(')')) throw this.unexpected('")"');
      this.next();
      return inner;
    }
    return this.match();
  }

  /** A value on the left means `value [not] in selector`; a selector means one of the other forms. */
  private match(): SelectorNode {
    this.clauses++;
    const first = this.peek();
    const leftIsValue =
      first.t === 'string' ||
      first.t === 'number' ||
      (first.t === 'ident' && (this.isWord('in', 1) || (this.isWord('not', 1) && this.isWord('in', 2))));
    if (leftIsValue) {
      const value = this.value();
      let negated = false;
      if (this.isWord('not')) {
        this.next();
        negated = true;
      }
      this.expectWord('in');
      this.next();
      const path = this.selector();
      return { kind: negated ? 'notContains' : 'contains', path, value };
    }
    const path = this.selector();
    const op = this.peek();
    if (op.t === 'op' && (op.v === '==' || op.v === '!=')) {
      this.next();
      return { kind: op.v === '==' ? 'eq' : 'ne', path, value: this.value() };
    }
    if (this.isWord('is')) {
      this.next();
      let negated = false;
      if (this.isWord('not')) {
        this.next();
        negated = true;
      }
      this.expectWord('empty');
      this.next();
      return { kind: negated ? 'notEmpty' : 'empty', path };
    }
    let negated = false;
    if (this.isWord('not')) {
      this.next();
      negated = true;
    }
    if (this.isWord('contains')) {
      this.next();
      return { kind: negated ? 'notContains' : 'contains', path, value: this.value() };
    }
    if (this.isWord('matches')) {
      const column = this.next().col;
      // The pattern is compiled where it runs (auth/selectors.ts: RE2 semantics, off the event loop).
      return { kind: negated ? 'notMatches' : 'matches', path, value: this.value(), clause: this.clauses, column };
    }
    throw this.unexpected(
      negated ? '"contains", "matches" or "in"' : 'a matching operator ("==", "!=", "is empty", "contains", "matches", "in")',
    );
  }

  private selector(): Path {
    const first = this.peek();
    if (first.t !== 'ident' || KEYWORDS.has(first.v)) throw this.unexpected('a selector such as value.name');
    this.next();
    const path = [first.v];
    for (;;) {
      if (this.isOp('.')) {
        this.next();
        const part = this.peek();
        if (part.t !== 'ident') throw this.unexpected('a field name after "."');
        this.next();
        path.push(part.v);
      } else if (this.isOp('[')) {
        this.next();
        const part = this.peek();
        if (part.t !== 'string') throw this.unexpected('a quoted key inside "[ ]"');
        this.next();
        if (!this.isOp(']')) throw this.unexpected('"]"');
        this.next();
        path.push(part.v);
      } else {
        return path;
      }
    }
  }

  private value(): string {
    const t = this.peek();
    if (t.t === 'string' || t.t === 'number' || (t.t === 'ident' && !KEYWORDS.has(t.v))) {
      this.next();
      return t.v;
    }
    throw this.unexpected('a value such as "text"');
  }
}

/** Parses a selector; throws SelectorError saying what is wrong and where. */
export function parseSelector(text: string): SelectorNode {
  if (text.length > MAX_LENGTH) throw new SelectorError(`selector is longer than ${MAX_LENGTH} characters`);
  if (text.trim() === '') throw new SelectorError('selector is empty');
  return new Parser(tokenize(text)).parse();
}

/** Every selector path an expression reads, as dotted text. */
export function selectorPaths(node: SelectorNode): string[] {
  switch (node.kind) {
    case 'or':
    case 'and':
      return [...selectorPaths(node.left), ...selectorPaths(node.right)];
    case 'not':
      return selectorPaths(node.expr);
    default:
      return [node.path.join('.')];
  }
}

/**
 * The value at `path`: each part a key of the object reached so far; a map whose keys
 * contain dots (flattened claims) is also looked up by the rest of the path joined.
 */
export function select(data: unknown, path: Path): unknown {
  let current: unknown = data;
  for (let i = 0; i < path.length; i++) {
    if (current === null || typeof current !== 'object' || Array.isArray(current)) {
      throw new SelectorEvalError(`selector ${path.join('.')} does not name a value (at ${path.slice(0, i).join('.') || 'the top'})`);
    }
    const obj = current as Record<string, unknown>;
    const part = path[i] as string;
    if (Object.hasOwn(obj, part)) {
      current = obj[part];
      continue;
    }
    const rest = path.slice(i).join('.');
    if (Object.hasOwn(obj, rest)) return obj[rest];
    throw new SelectorEvalError(`selector ${path.join('.')} does not name a value`);
  }
  return current;
}

const text = (v: unknown): string =>
  typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);

function contains(container: unknown, value: string): boolean {
  if (Array.isArray(container)) return container.some((x) => text(x) === value);
  if (typeof container === 'string') return container.includes(value);
  if (container !== null && typeof container === 'object') return Object.hasOwn(container, value);
  return false;
}

function isEmpty(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (typeof v === 'string' || Array.isArray(v)) return v.length === 0;
  if (typeof v === 'object') return Object.keys(v).length === 0;
  return false;
}

/** The regular-expression clauses of a selector, in order. */
export function selectorPatterns(node: SelectorNode): Array<Extract<SelectorNode, { kind: 'matches' | 'notMatches' }>> {
  switch (node.kind) {
    case 'or':
    case 'and':
      return [...selectorPatterns(node.left), ...selectorPatterns(node.right)];
    case 'not':
      return selectorPatterns(node.expr);
    case 'matches':
    case 'notMatches':
      return [node];
    default:
      return [];
  }
}

/** How many matching clauses a selector holds. */
export function clauseCount(node: SelectorNode): number {
  switch (node.kind) {
    case 'or':
    case 'and':
      return clauseCount(node.left) + clauseCount(node.right);
    case 'not':
      return clauseCount(node.expr);
    default:
      return 1;
  }
}

/** A compiled regular expression, as `evaluateSelector` runs one. */
export interface Pattern {
  test(text: string): boolean;
}

/**
 * Evaluates a parsed selector over `data`, with `patternOf` giving each `matches` clause's
 * compiled expression; throws SelectorEvalError when a selector names nothing.
 */
export function evaluateSelector(node: SelectorNode, data: unknown, patternOf: (source: string) => Pattern): boolean {
  switch (node.kind) {
    case 'or':
      return evaluateSelector(node.left, data, patternOf) || evaluateSelector(node.right, data, patternOf);
    case 'and':
      return evaluateSelector(node.left, data, patternOf) && evaluateSelector(node.right, data, patternOf);
    case 'not':
      return !evaluateSelector(node.expr, data, patternOf);
    case 'eq':
      return text(select(data, node.path)) === node.value;
    case 'ne':
      return text(select(data, node.path)) !== node.value;
    case 'contains':
      return contains(select(data, node.path), node.value);
    case 'notContains':
      return !contains(select(data, node.path), node.value);
    case 'matches':
    case 'notMatches': {
      const v = select(data, node.path);
      if (typeof v !== 'string') throw new SelectorEvalError(`selector ${node.path.join('.')} is not a string: "matches" needs one`);
      const hit = patternOf(node.value).test(v);
      return node.kind === 'matches' ? hit : !hit;
    }
    case 'empty':
      return isEmpty(select(data, node.path));
    case 'notEmpty':
      return !isEmpty(select(data, node.path));
  }
}

/**
 * Whether a parsed selector (undefined: the empty selector, or one that does not parse) selects
 * `data`: the empty selector selects everything; one that does not parse or evaluate, nothing.
 */
export function selects(node: SelectorNode | null | undefined, data: unknown, patternOf: (source: string) => Pattern): boolean {
  if (node === null) return true;
  if (node === undefined) return false;
  try {
    return evaluateSelector(node, data, patternOf);
  } catch (err) {
    if (err instanceof SelectorEvalError) return false;
    throw err;
  }
}
