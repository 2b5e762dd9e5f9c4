import { describe, expect, it } from 'vitest';
import { quoteJSON } from '../../src/domain/json-text.js';

describe('quoteJSON', () => {
  it('writes what JSON.stringify writes, for plain and awkward strings', () => {
    const samples = [
      '',
      'b6f1c1f0-4d3a-4a55-9d7e-0c2f7f8e9a10',
      'aKFrt0zDab6vx0xXrU5CKHk0CaPvY/1Pnhf60wybGYY=',
      '/v1/acl/token?x=1&y=2',
      'say "hi"',
      'back\\slash',
      'line\nbreak\ttab\u0000nul\u001f',
      'snow ☃ and emoji 😀',
      'lone \ud800 high',
      'lone \udc00 low',
      '\u2028\u2029',
      'del \u007f',
    ];
    for (const s of samples) expect(quoteJSON(s)).toBe(JSON.stringify(s));
    for (let i = 0; i < 2000; i++) {
      const s = String.fromCharCode(...Array.from({ length: 8 }, () => Math.floor(Math.random() * 0x10000)));
      expect(quoteJSON(s)).toBe(JSON.stringify(s));
    }
  });
});
