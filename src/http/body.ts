import type { z } from 'zod';
import { type WatchwordError, invalid } from '../domain/errors.js';

const MAX_DEPTH = 32;

/** Largest request body, bytes (413 beyond). */
export const BODY_LIMIT = 1024 * 1024;

/** Parses a request body as JSON whatever its Content-Type; an empty body is `undefined`. */
export function parseJsonBody(text: unknown): unknown {
  if (typeof text !== 'string' || text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    if (err instanceof RangeError) throw invalid('Request decode failed: JSON nested too deeply');
    throw invalid(`Request decode failed: malformed JSON: ${(err as Error).message}`);
  }
}

function depthOf(value: unknown, limit: number): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (d > max) max = d;
    if (max > limit) return max;
    if (v !== null && typeof v === 'object') for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

function pathText(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  return out;
}

/** Turns the first zod issue into a 400 that names the field and the problem. */
export function decodeError(error: z.ZodError): WatchwordError {
  const issue = error.issues[0] as z.core.$ZodIssue;
  if (issue.code === 'unrecognized_keys') {
    const where = issue.path.length > 0 ? ` in ${pathText(issue.path)}` : '';
    return invalid(`Request decode failed: unknown field ${JSON.stringify(issue.keys[0])}${where}`);
  }
  const where = issue.path.length > 0 ? `${pathText(issue.path)}: ` : '';
  return invalid(`Request decode failed: ${where}${issue.message}`);
}

/** Validates a decoded body against a schema; `undefined` (no body) validates as `{}`. */
export function decodeBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const value = body === undefined ? {} : body;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalid('Request decode failed: the body must be a JSON object');
  }
  if (depthOf(value, MAX_DEPTH) > MAX_DEPTH) throw invalid('Request decode failed: JSON nested too deeply');
  const result = schema.safeParse(value);
  if (!result.success) throw decodeError(result.error);
  return result.data;
}
