import { type DestinationStream, type Logger, pino } from 'pino';
import { PinoPretty } from 'pino-pretty';

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

/** JSON lines, or human-readable output when stdout is a terminal. */
export function createAgentLogger(level: string): Logger {
  return createLogger(level, process.stdout.isTTY ? PinoPretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' }) : undefined);
}
