import { z } from 'zod';

/**
 * What `watchword agent --help` says of a setting, declared beside its schema in config/schema.ts:
 * the value's name and one line. Its default is read from the schema, never written here.
 */
export interface SettingDoc {
  readonly arg: string;
  readonly help: string;
  /** The default in words, where it is not a value the schema holds (`./data/<datacenter>`, the host name). */
  readonly defaultText?: string;
}

const settingDocs = z.registry<SettingDoc>();

/** A setting's schema with its help (a copy: schemas shared by several settings each keep their own). */
export function setting<T extends z.ZodType>(doc: SettingDoc, schema: T): T {
  const copy: z.ZodType = schema.clone();
  copy.register(settingDocs, doc);
  return copy as T;
}

/** The default a schema gives when a setting is not set, if it gives one. */
export function defaultOf(schema: z.ZodType): unknown {
  const def = schema._zod.def as { type: string; defaultValue?: unknown };
  return def.type === 'default' ? def.defaultValue : undefined;
}

const UNITS: Array<[number, string]> = [
  [3_600_000, 'h'],
  [60_000, 'm'],
  [1_000, 's'],
];

/** Milliseconds in the largest unit that holds them whole: 86400000 is `24h`, 250 is `250ms`. */
export function shortDuration(ms: number): string {
  if (ms === 0) return '0s';
  for (const [size, unit] of UNITS) if (ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

const binary = (bytes: number): string => {
  for (const [size, unit] of [
    [1024 ** 3, 'GiB'],
    [1024 ** 2, 'MiB'],
    [1024, 'KiB'],
  ] as const)
    if (bytes % size === 0) return `${bytes / size} ${unit}`;
  return `${bytes} bytes`;
};

/** A default as the help and the configuration reference write it (undefined: an empty list or map, which says nothing). */
export function renderDefault(arg: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.join(',');
  if (typeof value === 'object' && value !== null) return Object.keys(value).length === 0 ? undefined : JSON.stringify(value);
  if (arg === 'DURATION') return shortDuration(value as number);
  if (arg === 'BYTES') return `${value}, ${binary(value as number)}`;
  return String(value);
}

/** A setting's flag help: its line, then its default (from the schema, or in words). */
export function flagHelp(schema: z.ZodType): { arg: string; help: string } {
  const doc = settingDocs.get(schema);
  if (doc === undefined) throw new Error('a setting without help: declare it with setting() in config/schema.ts');
  if (doc.defaultText !== undefined) return { arg: doc.arg, help: `${doc.help} (default: ${doc.defaultText})` };
  const shown = renderDefault(doc.arg, defaultOf(schema));
  return { arg: doc.arg, help: shown === undefined ? doc.help : `${doc.help} (default ${shown})` };
}
