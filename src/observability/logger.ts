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
