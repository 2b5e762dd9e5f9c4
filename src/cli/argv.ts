/**
 * Consul's CLI takes long flags with one dash (`-http-addr`, `-policy-name=x`).
 * Commander reads those as bundles of short flags, so known long flags written with
 * one dash are rewritten to two before parsing. Anything else (values such as
 * `-5m`, a `-` for stdin) is left alone.
 */
export function normalizeArgv(argv: readonly string[], longFlags: ReadonlySet<string>): string[] {
  const out: string[] = [];
  let afterDoubleDash = false;
  for (const arg of argv) {
    if (afterDoubleDash || arg === '--') {
      afterDoubleDash = true;
      out.push(arg);
      continue;
    }
    const m = /^-([a-z][a-z0-9-]+)(=.*)?$/.exec(arg);
    out.push(m && longFlags.has(m[1] as string) ? `-${arg}` : arg);
  }
  return out;
}
