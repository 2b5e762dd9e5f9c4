import type { PolicyResponse, RoleResponse, TokenResponse } from '../api/schemas.js';
import { tokenHash } from '../domain/hash.js';
import { type FieldTable, POLICY_FIELDS, ROLE_FIELDS, TOKEN_FIELDS } from '../domain/records.js';
import type { NamedLink, PolicyRecord, RoleRecord, TokenRecord } from '../domain/types.js';

/**
 * JSON text of a value, already serialised (from a cache of views); sent as it is. Its UTF-8
 * bytes are made once, on first use, so a cached view is not encoded again per answer.
 */
export class JSONText {
  private str: string | undefined;
  private buf: Buffer | undefined;

  /** Response headers the answer carries besides the usual ones (a paged list's next cursor). */
  headers: Readonly<Record<string, string>> | undefined;

  /** Made for one answer (a list's token read for a moment): written into the answer from its text, never encoded on its own. */
  private passing = false;

  constructor(json: string | Buffer) {
    if (typeof json === 'string') this.str = json;
    else this.buf = json;
  }

  /** JSON text made for one answer alone (see `array`). */
  static passing(json: string): JSONText {
    const text = new JSONText(json);
    text.passing = true;
    return text;
  }

  /** This answer, sent with `headers` as well. */
  withHeaders(headers: Readonly<Record<string, string>>): this {
    this.headers = headers;
    return this;
  }

  get text(): string {
    this.str ??= (this.buf as Buffer).toString('utf8');
    return this.str;
  }

  get bytes(): Buffer {
    this.buf ??= Buffer.from(this.str as string, 'utf8');
    return this.buf;
  }

  /** This JSON object with one more member at its end (`json`: the member's value as JSON text). */
  withMember(name: string, json: string): JSONText {
    const head = this.bytes;
    if (head[head.length - 1] !== 0x7d /* } */) throw new Error('withMember: not a JSON object');
    const tail = Buffer.from(`${head.length > 2 ? ',' : ''}${JSON.stringify(name)}:${json}}`, 'utf8');
    return new JSONText(Buffer.concat([head.subarray(0, head.length - 1), tail]));
  }

  /**
   * A JSON array of these values, copied byte for byte into one buffer outside the heap. An item
   * made for this answer alone (`passing`: a list's token read for a moment) is written from its
   * text, with no buffer of its own and no joined string: a page's 400 KB in the heap would be old
   * garbage at once, and a major collection every few seconds under a stream of pages. Any other
   * item is encoded once and its bytes kept (a cached view, copied into every answer that has it).
   */
  static array(items: readonly JSONText[]): JSONText {
    if (items.length === 0) return new JSONText('[]');
    let length = 1 + items.length;
    for (const item of items) length += item.passing ? Buffer.byteLength(item.str as string, 'utf8') : item.bytes.length;
    const out = Buffer.allocUnsafe(length);
    let at = 0;
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as JSONText;
      out[at++] = i === 0 ? 0x5b /* [ */ : 0x2c; /* , */
      at += item.passing ? out.write(item.str as string, at, 'utf8') : item.bytes.copy(out, at);
    }
    out[at] = 0x5d; /* ] */
    return new JSONText(out);
  }
}

/**
 * A JSON array too long to make whole (a whole list of many tokens): its items' bytes made a page
 * at a time as it is sent, so no more than a page is held. `chunks` starts a walk of its own each
 * time it is called (several readers may share one answer).
 */
export class JSONStream {
  constructor(private readonly pages: () => Iterable<readonly JSONText[]>) {}

  *chunks(): IterableIterator<Buffer> {
    let first = true;
    for (const page of this.pages()) {
      if (page.length === 0) continue;
      const body = JSONText.array(page).bytes;
      // The page's own array brackets become the whole array's opening, or a comma between pages.
      body[0] = first ? 0x5b /* [ */ : 0x2c; /* , */
      first = false;
      yield body.subarray(0, body.length - 1);
    }
    yield Buffer.from(first ? '[]' : ']');
  }

  /** The whole array at once (a pretty-printed answer, which must be parsed whole anyway). */
  whole(): JSONText {
    return new JSONText(Buffer.concat([...this.chunks()]));
  }
}

/** What a caller without acl:write sees in place of a secret. */
export const REDACTED = '<hidden>';

/**
 * Response shapes come from the wire contract (src/api/schemas.ts), so the server,
 * the OpenAPI document and the client share one definition. Empty arrays are omitted
 * (as Consul does); Description and Local are always present; key order follows Consul's.
 */
export type TokenView = TokenResponse;
export type PolicyView = PolicyResponse;
export type RoleView = RoleResponse;

/** How a view is made of a record (domain/records.ts `view`). */
export interface ViewOptions {
  /** The real secret rather than `<hidden>`. */
  showSecret?: boolean;
  /** Each linking field's links with their targets' names (dropped: links to what no longer exists). */
  names?: Readonly<Record<string, readonly NamedLink[]>>;
  /** The content hash (computed from the record as shown, never taken from the stored field). */
  hash: () => string;
  /** A full read (fields shown only there, such as a policy's rules), not a list item. */
  detail?: boolean;
}

const isEmpty = (v: unknown): boolean => v === undefined || v === '' || (Array.isArray(v) && v.length === 0);

/** One field's part of a view: writes the field into `out` as its view mode says. */
type ViewStep = (r: Record<string, unknown>, o: ViewOptions, out: Record<string, unknown>) => void;

const copied = (v: unknown): unknown => (Array.isArray(v) ? [...v] : v);

function viewStep(name: string, mode: NonNullable<FieldTable[string]['view']>): ViewStep {
  switch (mode) {
    case 'plain':
      return (r, _o, out) => {
        const v = r[name];
        if (v !== undefined) out[name] = copied(v);
      };
    case 'omitEmpty':
      return (r, _o, out) => {
        const v = r[name];
        if (!isEmpty(v)) out[name] = copied(v);
      };
    case 'named':
      return (_r, o, out) => {
        const named = o.names?.[name];
        if (named !== undefined && named.length > 0) out[name] = [...named];
      };
    case 'secret':
      return (r, o, out) => {
        out[name] = o.showSecret ? r[name] : REDACTED;
      };
    case 'hash':
      return (_r, o, out) => {
        out[name] = o.hash();
      };
    case 'detail':
      return (r, o, out) => {
        const v = r[name];
        if (o.detail && v !== undefined) out[name] = v;
      };
    case 'withAuthMethod':
      return (r, _o, out) => {
        const v = r[name];
        if (r.AuthMethod && v !== undefined) out[name] = v;
      };
    case 'never':
      return () => {};
  }
}

/** Each declaration's view steps, made once: a view is made per record shown, in lists of thousands. */
const viewSteps = new WeakMap<FieldTable, readonly ViewStep[]>();

/**
 * A record as a caller sees it, field by field as its declaration says, in the declared order
 * (Consul's key order): every field is shown unless its view mode leaves it out, so a field
 * added to a record is shown without a line here.
 */
export function viewOf(fields: FieldTable, record: object, o: ViewOptions): Record<string, unknown> {
  let steps = viewSteps.get(fields);
  if (steps === undefined)
    viewSteps.set(fields, (steps = Object.entries(fields).map(([name, spec]) => viewStep(name, spec.view ?? 'plain'))));
  const out: Record<string, unknown> = {};
  for (let i = 0; i < steps.length; i++) (steps[i] as ViewStep)(record as Record<string, unknown>, o, out);
  return out;
}

/**
 * `hash`: the content hash when the caller has just computed it from this record's content
 * (a create); otherwise it is computed here, never taken from the stored field.
 */
export function tokenView(
  t: TokenRecord,
  links: { policies: NamedLink[]; roles: NamedLink[] },
  showSecret: boolean,
  hash?: string,
): TokenView {
  return viewOf(TOKEN_FIELDS, t, {
    showSecret,
    names: { Policies: links.policies, Roles: links.roles },
    // From the content, not the stored field: a hash is never taken on trust (docs/security.md, "Security").
    hash: () => hash ?? tokenHash(t),
  }) as TokenView;
}

export function policyView(p: PolicyRecord, withRules = true): PolicyView {
  // A policy's Hash was computed from its record when it was read (store/record-check.ts).
  return viewOf(POLICY_FIELDS, p, { hash: () => p.Hash, detail: withRules }) as PolicyView;
}

export function roleView(r: RoleRecord, policies: NamedLink[]): RoleView {
  return viewOf(ROLE_FIELDS, r, { names: { Policies: policies }, hash: () => r.Hash }) as RoleView;
}
