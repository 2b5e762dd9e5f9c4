import { z } from 'zod';

/** The field names of each case-insensitive object schema, as declared. */
const FIELDS = new WeakMap<object, readonly string[]>();

/** The fields a `ciObject` schema takes (what a form for it must show or keep). */
export function fieldsOf(schema: z.ZodType): readonly string[] {
  const fields = FIELDS.get(schema);
  if (fields === undefined) throw new TypeError('not a ciObject schema');
  return fields;
}

/**
 * An object schema whose field names match case-insensitively (`accessorid` is
 * `AccessorID`), refusing unknown fields. `ignored` names return-side fields that
 * clients echo back on update: accepted, then dropped.
 */
export function ciObject<S extends z.ZodRawShape>(shape: S, ignored: readonly string[] = []) {
  const canonical = new Map<string, string>();
  for (const k of Object.keys(shape)) canonical.set(k.toLowerCase(), k);
  const ignore = new Set(ignored.map((k) => k.toLowerCase()));
  const strict = z.strictObject(shape);
  // Typed as the object it checks (input and output), so clients get the field types.
  const schema = z.preprocess((value, ctx) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      const lower = key.toLowerCase();
      if (ignore.has(lower)) continue;
      const name = canonical.get(lower) ?? key;
      if (Object.hasOwn(out, name)) {
        ctx.addIssue({ code: 'custom', message: `field ${JSON.stringify(name)} is given more than once`, input: value });
        continue;
      }
      Object.defineProperty(out, name, { value: v, enumerable: true, writable: true, configurable: true });
    }
    return out;
  }, strict) as unknown as z.ZodType<z.output<typeof strict>, z.input<typeof strict>>;
  FIELDS.set(schema, Object.keys(shape));
  return schema;
}
