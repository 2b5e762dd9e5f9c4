import { describe, expect, it } from 'vitest';
import { LineRing } from '../../src/observability/line-ring.js';

const stub = () => 'stub';

/** Every kept line is the one pushed under its number; numbers kept are a contiguous run ending at the newest. */
function checkAgainst(ring: LineRing, pushed: string[]): void {
  for (let seq = ring.oldest(); seq <= ring.latest(); seq++) expect(ring.lineOf(seq)).toBe(pushed[seq - 1]);
}

describe('LineRing', () => {
  it('keeps the newest lines by count', () => {
    const ring = new LineRing(3, 1024);
    const pushed = ['a', 'b', 'c', 'd', 'e'];
    pushed.forEach((l, i) => expect(ring.push(l, 1000 + i, stub)).toBe(i + 1));
    expect([ring.oldest(), ring.latest()]).toEqual([3, 5]);
    checkAgainst(ring, pushed);
    expect(ring.timeOf(5)).toBe(1004);
  });

  it('drops the oldest lines whose bytes a new line needs, across many wraps, with lines of every length', () => {
    const ring = new LineRing(1000, 4096);
    const pushed: string[] = [];
    let seed = 7;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let i = 0; i < 5000; i++) {
      const line = `${i}:${'é☃x'.repeat(Math.floor(rand() * 120))}\n`;
      pushed.push(line);
      ring.push(line, i, stub);
      checkAgainst(ring, pushed);
      // Never more kept than fits.
      let bytes = 0;
      for (let s = ring.oldest(); s <= ring.latest(); s++) bytes += Buffer.byteLength(ring.lineOf(s));
      expect(bytes).toBeLessThanOrEqual(4096);
    }
    expect(ring.latest()).toBe(5000);
    expect(ring.oldest()).toBeGreaterThan(4900);
  });

  it('keeps a stub for a line longer than a quarter of its bytes', () => {
    const ring = new LineRing(10, 400);
    ring.push('short', 1, stub);
    ring.push('x'.repeat(101), 2, stub);
    expect(ring.lineOf(2)).toBe('stub');
    expect(ring.lineOf(1)).toBe('short');
  });
});
