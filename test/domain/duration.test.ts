import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '../../src/domain/duration.js';

describe('Go durations', () => {
  it.each([
    ['90s', 90_000],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
    ['300ms', 300],
    ['2h45m10.5s', 9_910_500],
    ['0', 0],
    ['-5m', -300_000],
    ['1us', 0.001],
  ])('parses %s', (text, ms) => {
    expect(parseDuration(text)).toBeCloseTo(ms, 9);
  });

  it.each(['', '5', 'h', '1x', '1h 30m', 'forever', '--1s', '1.2.3s'])('refuses %j', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });

  it.each([
    [60_000, '1m0s'],
    [30_000, '30s'],
    [86_400_000, '24h0m0s'],
    [90_500, '1m30.5s'],
    [1500, '1.5s'],
    [250, '250ms'],
    [-300_000, '-5m0s'],
    [0, '0s'],
  ])('formats %d ms as %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});
