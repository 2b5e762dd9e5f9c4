import { type DestinationStream, type Logger, pino } from 'pino';

/**
 * Paths pino censors wherever they appear. Request logs never carry headers, query
 * strings or bodies in the first place; this is the second line of defence for
 * anything that logs an object holding a secret.
 */
export const REDACT_PATHS = [
  'SecretID',
  '*.SecretID',
  '*.*.SecretID',
  'secret',
  '*.secret',
  'token',
  '*.token',
  'headers.authorization',
  'headers["x-service-token"]',
  'headers["x-consul-token"]',
  '*.headers.authorization',
  '*.headers["x-service-token"]',
  '*.headers["x-consul-token"]',
  'replication_token',
  'initial_management_token',
  '*.replication_token',
  '*.initial_management_token',
];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'watchword' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

/** pino-roll ships no types: imported by a name TypeScript does not resolve. */
const ROLL_PACKAGE = 'pino-roll';

export interface AgentLogOptions {
  level: string;
  /** json, or text (human-readable); default: text on a terminal, JSON otherwise. */
  format?: 'json' | 'text';
  /** Also written to this file (JSON lines), rotated by size. */
  file?: string;
  rotateBytes: number;
  maxFiles: number;
}

/**
 * The daemon's logger (docs/operations.md: Operations): JSON lines with level names, or text on a
 * terminal; also to `log_file`, rotated by size (pino-roll). In JSON mode every line is JSON:
 * Node's own warnings (a deprecation, a TLS server name that is an IP) are logged through it
 * instead of printed as plain text.
 */
export async function createAgentLogger(options: AgentLogOptions): Promise<Logger> {
  const format = options.format ?? (process.stdout.isTTY ? 'text' : 'json');
  // The text formatter only when asked for (a terminal): a daemon logging JSON never loads it.
  const PinoPretty = format === 'text' ? (await import('pino-pretty')).PinoPretty : undefined;
  const streams: pino.StreamEntry[] = [
    {
      level: 'trace',
      stream: PinoPretty
        ? PinoPretty({ colorize: process.stdout.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' })
        : process.stdout,
    },
  ];
  if (options.file) {
    const { default: roll } = (await import(ROLL_PACKAGE)) as { default: (o: Record<string, unknown>) => Promise<pino.DestinationStream> };
    streams.push({
      level: 'trace',
      stream: await roll({ file: options.file, size: options.rotateBytes, limit: { count: options.maxFiles }, mkdir: true }),
    });
  }
  const logger = pino(
    {
      level: options.level,
      base: { service: 'watchword' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    pino.multistream(streams),
  );
  if (format === 'json') {
    process.removeAllListeners('warning');
    process.on('warning', (w: Error & { code?: string }) =>
      logger.warn({ warning: w.name, ...(w.code ? { code: w.code } : {}) }, w.message),
    );
  }
  return logger;
}
