import { describe, expect, it } from 'vitest';
import { IndexHeaders } from '../../src/http/direct.js';

/** Names and values side by side, as a map. */
const asMap = (flat: readonly string[]) => Object.fromEntries(flat.flatMap((v, i) => (i % 2 === 0 ? [[v, flat[i + 1]]] : [])));

describe("a direct read's prepared headers", () => {
  it('carry the index headers, the content type and the length, and follow every change of a value', () => {
    const h = new IndexHeaders();
    const a = h.answer(7, true, 0, 120);
    expect(asMap(a)).toEqual({
      'x-service-index': '7',
      'x-service-knownleader': 'true',
      'x-service-lastcontact': '0',
      'x-service-effective-consistency': 'leader',
      'x-consul-index': '7',
      'x-consul-knownleader': 'true',
      'x-consul-lastcontact': '0',
      'x-consul-effective-consistency': 'leader',
      'content-type': 'application/json; charset=utf-8',
      'content-length': '120',
    });
    // Made once per index and length.
    expect(h.answer(7, true, 0, 120)).toBe(a);
    expect(asMap(h.answer(7, true, 0, 98))['content-length']).toBe('98');
    // Any value changed: made again.
    expect(asMap(h.answer(8, true, 0, 120))['x-consul-index']).toBe('8');
    expect(asMap(h.answer(8, false, 0, 120))['x-service-knownleader']).toBe('false');
    expect(asMap(h.answer(8, false, 35, 120))['x-consul-lastcontact']).toBe('35');
    // A routed read asking another consistency in between does not leave the direct one stale.
    h.get(8, false, 35, 'stale');
    expect(asMap(h.answer(8, false, 35, 120))['x-service-effective-consistency']).toBe('leader');
  });

  it('keep a bounded number of lengths', () => {
    const h = new IndexHeaders();
    for (let n = 1; n <= 1000; n++) expect(asMap(h.answer(3, true, 0, n))['content-length']).toBe(String(n));
    expect((h as unknown as { prepared: Map<number, unknown> }).prepared.size).toBeLessThanOrEqual(256);
  });
});
