import { z } from 'zod';
import { parseDuration } from '../domain/duration.js';

// The kinds of value settings take (config/schema.ts): each read from a config file, a flag or the
// environment, and checked with a message that names what was expected.

export const DC_RE = /^[a-z0-9]([a-z0-9\-_]*[a-z0-9])?$/;

export const datacenterName = z.string().regex(DC_RE, 'expected a datacenter name of lowercase letters, digits, "-" and "_"').max(64);

export const duration = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const ms = typeof value === 'number' ? value : parseDuration(value);
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) {
    ctx.addIssue({ code: 'custom', message: `expected a duration such as "90s" or "1h30m", got ${JSON.stringify(value)}` });
    return z.NEVER;
  }
  return ms;
});

/** A boolean from a config file (true/false) or a flag or env var ("true", "false", "1", "0"; a bare flag is true). */
export const bool = z.union([z.boolean(), z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1')]);

export const filePath = z.string().min(1);
/** A rotated file's size limit, bytes (the audit log's and the log file's): 1 KiB to 1 TiB, default 64 MiB. */
export const rotateBytes = z.coerce
  .number()
  .int()
  .min(1024)
  .max(1024 ** 4)
  .default(64 * 1024 * 1024);

/** 32 random bytes in base64: the key the servers of a datacenter prove themselves with when they run without TLS. */
export const serverKey = z.string().transform((v, ctx) => {
  const bytes = Buffer.from(v.trim(), 'base64');
  if (bytes.length !== 32 || bytes.toString('base64') !== v.trim()) {
    ctx.addIssue({ code: 'custom', message: 'expected 32 random bytes in base64 (make one with `watchword keygen`)' });
    return z.NEVER;
  }
  return bytes;
});

export const hostPort = z.string().refine((v) => parseHostPort(v) !== undefined, {
  message: 'expected HOST:PORT with a port from 0 to 65535 (0 picks a free port)',
});

/** Where the API listens: HOST:PORT, or a base URL naming one (the form the CLI's WATCHWORD_HTTP_ADDR takes). */
export const listenAddress = z.preprocess((v) => (typeof v === 'string' ? v.replace(/^https?:\/\/([^/]*)\/?$/i, '$1') : v), hostPort);

/** Whether a host is a wildcard bind address, which says nothing about where to reach a daemon. */
export const isWildcardHost = (host: string): boolean =>
  host === '' || host === '0.0.0.0' || host === '::' || host === '[::]' || host === '::0';

export function parseHostPort(value: string): { host: string; port: number } | undefined {
  const m = /^(\[[^\]]+\]|[^:\s]+):(\d{1,5})$/.exec(value);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port > 65535) return undefined;
  return { host: (m[1] as string).replace(/^\[|\]$/g, ''), port };
}

export const httpURL = z.string().refine(
  (v) => {
    try {
      const u = new URL(v);
      return u.protocol === 'http:' || u.protocol === 'https:';
    } catch {
      return false;
    }
  },
  { message: 'expected an http:// or https:// URL' },
);

/**
 * Addresses of other datacenters' daemons an operator vouches for, as
 * `{"dc2": "http://10.0.0.2:8500"}` in a config file or `dc2=http://…,dc3=http://…` in a
 * flag or the environment. They win over addresses datacenters report for themselves.
 */
export const datacenterAddresses = z
  .union([
    z.string().transform((v, ctx) => {
      const out: Record<string, string> = {};
      for (const part of v
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean)) {
        const eq = part.indexOf('=');
        if (eq <= 0) {
          ctx.addIssue({ code: 'custom', message: `expected NAME=URL pairs separated by commas, got ${JSON.stringify(part)}` });
          return z.NEVER;
        }
        out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
      }
      return out;
    }),
    z.record(z.string(), z.unknown()),
  ])
  .pipe(z.record(datacenterName, httpURL));

/** A list from a config file (an array) or a flag or env var (comma-separated), each item checked by `item`. */
export const commaList = <T extends z.ZodType<unknown, string>>(item: T) =>
  z
    .union([
      z.string().transform((v) =>
        v
          .split(',')
          .map((p) => p.trim())
          .filter(Boolean),
      ),
      z.array(z.string()),
    ])
    .pipe(z.array(item));
