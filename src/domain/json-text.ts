/** JSON written as text by hand, where building an object to stringify costs more than the text (audit lines). */

/** A string as JSON: as is between quotes when nothing in it needs escaping (the usual ID, name or path). */
export function quoteJSON(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(s);
  }
  return `"${s}"`;
}
