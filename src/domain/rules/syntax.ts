/**
 * Parser for the rules text of a policy: the HCL subset Consul policies use
 * (attributes, labelled blocks, lists, comments) and JSON. Both produce the same
 * tree, with positions, so validation errors can point at a line and column.
 */

export interface Position {
  line: number;
  column: number;
}

export type Scalar = string | number | boolean;

export interface Attribute {
  key: string;
  value: Value;
  pos: Position;
}

export interface Block {
  type: string;
  label: string;
  body: Body;
  pos: Position;
}

export interface Body {
  attributes: Attribute[];
  blocks: Block[];
}

export type Value = Scalar | Value[] | { object: Body };

export class RulesSyntaxError extends Error {
  constructor(
    readonly reason: string,
    readonly pos: Position,
  ) {
    super(`At ${pos.line}:${pos.column}: ${reason}`);
    this.name = 'RulesSyntaxError';
  }
}

type TokenKind = 'ident' | 'string' | 'number' | 'bool' | 'punct' | 'newline' | 'eof';

interface Token {
  kind: TokenKind;
  text: string;
  value?: Scalar;
  pos: Position;
}

const MAX_DEPTH = 32;

/** A place in the rules' source, moved on character by character (lines and columns for errors). */
class Cursor {
  i = 0;
  private line = 1;
  private col = 1;

  constructor(readonly src: string) {}

  pos(): Position {
    return { line: this.line, column: this.col };
  }

  at(k = 0): string | undefined {
    return this.src[this.i + k];
  }

  get done(): boolean {
    return this.i >= this.src.length;
  }

  advance(n: number): void {
    for (let k = 0; k < n; k++) {
      if (this.src[this.i] === '\n') {
        this.line++;
        this.col = 1;
      } else {
        this.col++;
      }
      this.i++;
    }
  }
}

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  const cur = new Cursor(src);
  while (!cur.done) {
    const c = cur.at() as string;
    if (c === '\n') {
      tokens.push({ kind: 'newline', text: '\n', pos: cur.pos() });
      cur.advance(1);
    } else if (c === ' ' || c === '\t' || c === '\r' || c === '\uFEFF') {
      cur.advance(1);
    } else if (c === '#' || (c === '/' && cur.at(1) === '/')) {
      while (!cur.done && cur.at() !== '\n') cur.advance(1);
    } else if (c === '/' && cur.at(1) === '*') {
      const start = cur.pos();
      cur.advance(2);
      while (!cur.done && !(cur.at() === '*' && cur.at(1) === '/')) cur.advance(1);
      if (cur.done) throw new RulesSyntaxError('unterminated comment', start);
      cur.advance(2);
    } else if ('{}[]=:,'.includes(c)) {
      tokens.push({ kind: 'punct', text: c, pos: cur.pos() });
      cur.advance(1);
    } else if (c === '"') {
      tokens.push(readString(cur));
    } else {
      tokens.push(readWord(cur, c));
    }
  }
  tokens.push({ kind: 'eof', text: '', pos: cur.pos() });
  return tokens;
}

const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', n: '\n', t: '\t', r: '\r', b: '\b', f: '\f' };

/** A double-quoted string, its escapes as JSON's. */
function readString(cur: Cursor): Token {
  const start = cur.pos();
  cur.advance(1);
  let out = '';
  for (;;) {
    if (cur.done || cur.at() === '\n') throw new RulesSyntaxError('unterminated string', start);
    const ch = cur.at() as string;
    if (ch === '"') {
      cur.advance(1);
      break;
    }
    if (ch === '\\') {
      const esc = cur.at(1);
      if (esc !== undefined && esc in ESCAPES) {
        out += ESCAPES[esc];
        cur.advance(2);
        continue;
      }
      if (esc === 'u') {
        const hex = cur.src.slice(cur.i + 2, cur.i + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw new RulesSyntaxError('invalid unicode escape in string', cur.pos());
        out += String.fromCharCode(parseInt(hex, 16));
        cur.advance(6);
        continue;
      }
      throw new RulesSyntaxError('invalid escape sequence in string', cur.pos());
    }
    out += ch;
    cur.advance(1);
  }
  return { kind: 'string', text: out, value: out, pos: start };
}

/** A number, a boolean or an identifier; anything else is refused. */
function readWord(cur: Cursor, c: string): Token {
  const pos = cur.pos();
  const num = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(cur.src.slice(cur.i, cur.i + 64));
  if (num && (c === '-' || /\d/.test(c))) {
    cur.advance(num[0].length);
    return { kind: 'number', text: num[0], value: Number(num[0]), pos };
  }
  const ident = /^[A-Za-z_][A-Za-z0-9_\-.]*/.exec(cur.src.slice(cur.i, cur.i + 256));
  if (ident) {
    const text = ident[0];
    cur.advance(text.length);
    if (text === 'true' || text === 'false') return { kind: 'bool', text, value: text === 'true', pos };
    return { kind: 'ident', text, pos };
  }
  if (c === '<' && cur.at(1) === '<') throw new RulesSyntaxError('heredoc strings are not supported in ACL rules', pos);
  throw new RulesSyntaxError(`illegal character ${JSON.stringify(c)}`, pos);
}

class Parser {
  private i = 0;

  constructor(private readonly tokens: Token[]) {}

  private peek(skipNewlines = true): Token {
    if (skipNewlines) while ((this.tokens[this.i] as Token).kind === 'newline') this.i++;
    return this.tokens[this.i] as Token;
  }

  private next(skipNewlines = true): Token {
    const t = this.peek(skipNewlines);
    this.i++;
    return t;
  }

  private expect(text: string, what: string): Token {
    const t = this.next();
    if (t.kind !== 'punct' || t.text !== text) throw new RulesSyntaxError(`expected ${what}, got ${describe(t)}`, t.pos);
    return t;
  }

  // ---- HCL ----

  parseHclFile(): Body {
    const body = this.parseHclBody(0, true);
    const t = this.peek();
    if (t.kind !== 'eof') throw new RulesSyntaxError(`unexpected ${describe(t)}`, t.pos);
    return body;
  }

  private parseHclBody(depth: number, top: boolean): Body {
    if (depth > MAX_DEPTH) throw new RulesSyntaxError('rules nested too deeply', this.peek().pos);
    const body: Body = { attributes: [], blocks: [] };
    for (;;) {
      const t = this.peek();
      if (t.kind === 'eof') {
        if (!top) throw new RulesSyntaxError('expected "}" before end of input', t.pos);
        return body;
      }
      if (t.kind === 'punct' && t.text === '}') {
        if (top) throw new RulesSyntaxError('unexpected "}"', t.pos);
        return body;
      }
      if (t.kind === 'punct' && t.text === ',') {
        this.next();
        continue;
      }
      if (t.kind !== 'ident' && t.kind !== 'string') throw new RulesSyntaxError(`expected a key, got ${describe(t)}`, t.pos);
      this.next();
      const key = t.text;
      const after = this.peek();
      if (after.kind === 'punct' && after.text === '=') {
        this.next();
        body.attributes.push({ key, value: this.parseHclValue(depth + 1), pos: t.pos });
        continue;
      }
      const labels: Token[] = [];
      while (this.peek().kind === 'string' || this.peek().kind === 'ident') labels.push(this.next());
      const open = this.peek();
      if (!(open.kind === 'punct' && open.text === '{')) {
        throw new RulesSyntaxError(`expected "=" or "{" after ${JSON.stringify(key)}, got ${describe(open)}`, open.pos);
      }
      if (labels.length !== 1) {
        throw new RulesSyntaxError(`block ${JSON.stringify(key)} needs exactly one label, got ${labels.length}`, t.pos);
      }
      this.next();
      const inner = this.parseHclBody(depth + 1, false);
      this.expect('}', '"}"');
      body.blocks.push({ type: key, label: (labels[0] as Token).text, body: inner, pos: t.pos });
    }
  }

  private parseHclValue(depth: number): Value {
    if (depth > MAX_DEPTH) throw new RulesSyntaxError('rules nested too deeply', this.peek().pos);
    const t = this.next();
    if (t.kind === 'string' || t.kind === 'number' || t.kind === 'bool') return t.value as Scalar;
    if (t.kind === 'punct' && t.text === '[') {
      const items: Value[] = [];
      for (;;) {
        const p = this.peek();
        if (p.kind === 'punct' && p.text === ']') {
          this.next();
          return items;
        }
        items.push(this.parseHclValue(depth + 1));
        const sep = this.peek();
        if (sep.kind === 'punct' && sep.text === ',') this.next();
        else if (!(sep.kind === 'punct' && sep.text === ']'))
          throw new RulesSyntaxError(`expected "," or "]", got ${describe(sep)}`, sep.pos);
      }
    }
    if (t.kind === 'punct' && t.text === '{') {
      const body = this.parseHclBody(depth + 1, false);
      this.expect('}', '"}"');
      return { object: body };
    }
    throw new RulesSyntaxError(`expected a value, got ${describe(t)}`, t.pos);
  }

  // ---- JSON ----

  parseJsonFile(): Body {
    const open = this.peek();
    if (!(open.kind === 'punct' && open.text === '{')) throw new RulesSyntaxError(`expected "{", got ${describe(open)}`, open.pos);
    const value = this.parseJsonValue(0);
    const t = this.peek();
    if (t.kind !== 'eof') throw new RulesSyntaxError(`unexpected ${describe(t)} after JSON object`, t.pos);
    return jsonToBody(value as JsonObject);
  }

  private parseJsonValue(depth: number): JsonValue {
    if (depth > MAX_DEPTH) throw new RulesSyntaxError('rules nested too deeply', this.peek().pos);
    const t = this.next();
    if (t.kind === 'string' || t.kind === 'number' || t.kind === 'bool') return { scalar: t.value as Scalar, pos: t.pos };
    if (t.kind === 'ident' && t.text === 'null') return { scalar: '', pos: t.pos };
    if (t.kind === 'punct' && t.text === '[') {
      const items: JsonValue[] = [];
      if (this.peek().kind === 'punct' && this.peek().text === ']') {
        this.next();
        return { array: items, pos: t.pos };
      }
      for (;;) {
        items.push(this.parseJsonValue(depth + 1));
        const sep = this.next();
        if (sep.kind === 'punct' && sep.text === ']') return { array: items, pos: t.pos };
        if (!(sep.kind === 'punct' && sep.text === ',')) throw new RulesSyntaxError(`expected "," or "]", got ${describe(sep)}`, sep.pos);
      }
    }
    if (t.kind === 'punct' && t.text === '{') {
      const entries: JsonEntry[] = [];
      if (this.peek().kind === 'punct' && this.peek().text === '}') {
        this.next();
        return { entries, pos: t.pos };
      }
      for (;;) {
        const k = this.next();
        if (k.kind !== 'string') throw new RulesSyntaxError(`expected a quoted key, got ${describe(k)}`, k.pos);
        this.expect(':', '":"');
        entries.push({ key: k.text, pos: k.pos, value: this.parseJsonValue(depth + 1) });
        const sep = this.next();
        if (sep.kind === 'punct' && sep.text === '}') return { entries, pos: t.pos };
        if (!(sep.kind === 'punct' && sep.text === ',')) throw new RulesSyntaxError(`expected "," or "}", got ${describe(sep)}`, sep.pos);
      }
    }
    throw new RulesSyntaxError(`expected a value, got ${describe(t)}`, t.pos);
  }
}

interface JsonEntry {
  key: string;
  pos: Position;
  value: JsonValue;
}
interface JsonObject {
  entries: JsonEntry[];
  pos: Position;
}
type JsonValue = { scalar: Scalar; pos: Position } | { array: JsonValue[]; pos: Position } | JsonObject;

/**
 * JSON rules nest labelled blocks as objects keyed by label
 * (`{"key_prefix": {"": {"policy": "read"}}}`), optionally wrapped in arrays.
 * Scalars and lists of scalars are attributes.
 */
function jsonToBody(obj: JsonObject): Body {
  const body: Body = { attributes: [], blocks: [] };
  for (const entry of obj.entries) {
    addJsonEntry(body, entry.key, entry.pos, entry.value);
  }
  return body;
}

function addJsonEntry(body: Body, key: string, pos: Position, value: JsonValue): void {
  if ('scalar' in value) {
    body.attributes.push({ key, value: value.scalar, pos });
  } else if ('array' in value) {
    if (value.array.every((v) => 'scalar' in v)) {
      body.attributes.push({ key, value: value.array.map((v) => (v as { scalar: Scalar }).scalar), pos });
    } else {
      for (const item of value.array) addJsonEntry(body, key, item.pos, item);
    }
  } else {
    for (const labelled of value.entries) {
      const v = labelled.value;
      if (!('entries' in v)) {
        throw new RulesSyntaxError(`expected an object for ${JSON.stringify(key)} ${JSON.stringify(labelled.key)}`, labelled.pos);
      }
      body.blocks.push({ type: key, label: labelled.key, body: jsonToBody(v), pos: labelled.pos });
    }
  }
}

function describe(t: Token): string {
  switch (t.kind) {
    case 'eof':
      return 'end of input';
    case 'newline':
      return 'end of line';
    case 'string':
      return `string ${JSON.stringify(t.text)}`;
    default:
      return JSON.stringify(t.text);
  }
}

/** Parses rules text; JSON when it starts with `{`, HCL otherwise. */
export function parseRulesSyntax(src: string): Body {
  const tokens = tokenize(src);
  const first = tokens.find((t) => t.kind !== 'newline');
  const json = first !== undefined && first.kind === 'punct' && first.text === '{';
  const parser = new Parser(tokens);
  return json ? parser.parseJsonFile() : parser.parseHclFile();
}
