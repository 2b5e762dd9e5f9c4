import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import ts from 'typescript';
import madge from 'madge';
import { describe, expect, it } from 'vitest';

// The layers of src/ARCHITECTURE.md, checked against the code's imports: every import from
// one module (a folder of src/, or a file at its top) to another is one the table's "knows
// of" column names, and no file imports one that imports it back.

const root = new URL('..', import.meta.url).pathname;

/** `http/routes/tokens.ts` → `http`; `daemon.ts` → `daemon`. */
const moduleOf = (file: string) => file.split('/')[0]?.replace(/\.ts$/, '') as string;

/** The table: each module with the modules it may import (undefined: all, for the composition root). */
async function layers(): Promise<Map<string, Set<string> | undefined>> {
  const text = await readFile(`${root}src/ARCHITECTURE.md`, 'utf8');
  const table = new Map<string, Set<string> | undefined>();
  for (const line of text.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 5 || !cells[1]?.startsWith('`')) continue;
    const modules = [...(cells[1] as string).matchAll(/`([a-z-]+)(?:\/[a-z-]*|\.ts)?`/g)].map((m) => m[1] as string);
    // The remarks in parentheses say what of a module is used; the names outside them are the modules.
    const knows = (cells[3] as string).replace(/\([^)]*\)/g, '');
    // Modules sharing a row (the executable and its CLI) may import each other.
    const allowed = /everything/.test(knows) ? undefined : new Set([...(knows.match(/[a-z-]+/g) ?? []), ...modules]);
    for (const m of modules) table.set(m, allowed);
  }
  return table;
}

describe('the layers of src/ARCHITECTURE.md', () => {
  it('are the imports of src/: no module imports one its row does not name, and no import circle', async () => {
    const table = await layers();
    expect(table.size).toBeGreaterThan(15);
    const graph = await madge(`${root}src`, { fileExtensions: ['ts'], tsConfig: `${root}tsconfig.json` });
    const unlisted: string[] = [];
    for (const [file, imports] of Object.entries(graph.obj())) {
      const from = moduleOf(file);
      if (!table.has(from)) {
        unlisted.push(`${file}: its module ${from} has no row`);
        continue;
      }
      const allowed = table.get(from);
      for (const imported of imports) {
        const to = moduleOf(imported);
        if (to !== from && allowed !== undefined && !allowed.has(to)) unlisted.push(`${file} imports ${imported} (${to})`);
      }
    }
    expect(unlisted).toEqual([]);
    expect(graph.circular()).toEqual([]);
  });
});

/** Every function in src/ (declarations, methods, arrows, expressions, constructors, accessors) longer than `max` lines. */
async function longFunctions(max: number): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(`${root}src`, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const path = join(entry.parentPath, entry.name);
    const file = ts.createSourceFile(path, await readFile(path, 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (n: ts.Node): void => {
      if (ts.isFunctionLike(n) && 'body' in n && n.body !== undefined) {
        const first = file.getLineAndCharacterOfPosition(n.getStart()).line;
        const lines = file.getLineAndCharacterOfPosition(n.getEnd()).line - first + 1;
        if (lines > max) out.push(`${path.slice(root.length)}:${first + 1} (${lines} lines)`);
      }
      ts.forEachChild(n, visit);
    };
    visit(file);
  }
  return out;
}

// TigerBeetle's limit of 70 lines is the aim; 100 is the bound this house holds every change to.
describe('the size of what src/ is made of', () => {
  it('has no function over 100 lines', async () => {
    expect(await longFunctions(100)).toEqual([]);
  });

  it('keeps the store composition (store/level-store.ts) within 500 lines', async () => {
    const lines = (await readFile(`${root}src/store/level-store.ts`, 'utf8')).split('\n').length;
    expect(lines).toBeLessThanOrEqual(500);
  });
});
