// madge ships no types; what test/architecture.test.ts uses of it.
declare module 'madge' {
  interface MadgeResult {
    /** Each file (relative to the base) with the files it imports. */
    obj(): Record<string, string[]>;
    circular(): string[][];
  }
  export default function madge(path: string, config?: { fileExtensions?: string[]; tsConfig?: string }): Promise<MadgeResult>;
}
