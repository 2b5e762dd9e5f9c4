/**
 * What the selector thread (selector-worker.ts) is asked and answers. Regular expressions are
 * compiled and run there, never on the event loop: RE2's cost is linear in the input, but its
 * constant is the program's size, which a rule's author chooses.
 */

/** Compile each pattern: its program size, or why it does not compile. */
export interface CompileRequest {
  id: number;
  kind: 'compile';
  patterns: string[];
}

/** Which of these selectors select `data`. */
export interface MatchRequest {
  id: number;
  kind: 'match';
  selectors: string[];
  data: unknown;
}

export type SelectorRequest = CompileRequest | MatchRequest;

export type SelectorAnswer =
  | { id: number; sizes: Array<number | { error: string }> }
  | { id: number; matched: boolean[] }
  | { id: number; error: string };
