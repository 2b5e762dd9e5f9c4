import { Writable } from 'node:stream';
import pino from 'pino';

/** A logger whose lines (JSON, one a string) are kept in `lines` (a new array, or the one given), for a test to read what a daemon said. */
export function loggedLines(
  level: pino.Level = 'info',
  base?: Record<string, unknown>,
  lines: string[] = [],
): { logger: pino.Logger; lines: string[] } {
  const logger = pino(
    { level, ...(base ? { base } : {}) },
    new Writable({
      write(chunk, _e, done) {
        lines.push(String(chunk));
        done();
      },
    }),
  );
  return { logger, lines };
}
