import { describe, expect, it } from 'vitest';
import { GoneSecrets } from '../../src/store/gone-secrets.js';

describe('GoneSecrets', () => {
  it('holds at most its count, the oldest going first; a secret noted again is kept as new', () => {
    let now = 1000;
    const gone = new GoneSecrets(4, 60_000, () => now);
    for (const s of ['a', 'b', 'c', 'd']) {
      gone.add(s);
      now++;
    }
    gone.add('a'); // again: now the newest
    now++;
    gone.add('e'); // pushes out the ring's oldest slot ('a' as first noted: kept, it was noted again)
    expect(['a', 'b', 'c', 'd', 'e'].filter((s) => gone.has(s))).toEqual(['a', 'c', 'd', 'e']);
    expect(gone.size).toBe(4);
    for (let i = 0; i < 10_000; i++) gone.add(`s${i}`);
    expect(gone.size).toBe(4);
    expect(gone.has('s9999') && gone.has('s9996') && !gone.has('s9995')).toBe(true);
  });

  it('forgets a secret in use again, and one older than its age', () => {
    let now = 0;
    const gone = new GoneSecrets(10, 1000, () => now);
    gone.add('x');
    gone.add('y');
    gone.forget('x');
    expect(gone.has('x')).toBe(false);
    now = 1001;
    expect(gone.has('y')).toBe(false);
  });
});
