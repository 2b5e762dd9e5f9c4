import { existsSync } from 'node:fs';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * A worker thread whose code is the file `name` (without extension) beside `from` (the
 * starter's `import.meta.url`), as it runs: compiled (`dist/`, or the agent bundle, whose
 * entry points include every worker) or from source through tsx (the test suite). Undefined
 * when neither is there.
 */
export function startThread(from: string, name: string, options: WorkerOptions = {}): Worker | undefined {
  const js = new URL(`./${name}.js`, from);
  if (existsSync(js)) return new Worker(js, options);
  const ts = new URL(`./${name}.ts`, from);
  if (!existsSync(ts)) return undefined;
  let tsx: string;
  try {
    tsx = import.meta.resolve('tsx/esm/api');
  } catch {
    return undefined;
  }
  const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(ts.href)}); })`;
  return new Worker(boot, { ...options, eval: true });
}
