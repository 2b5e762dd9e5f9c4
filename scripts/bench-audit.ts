/**
 * The audit log's cost (docs/audit.md, "Audit log"): token create and token read with the audit log on against
 * off, in the same run. Three daemons serve copies of one seeded data dir: audit off,
 * best-effort (the default) and enforced; all run on one core (taskset -c 1) and the load
 * generator (this process) on the other (taskset -c 0). Each round reads from each daemon, then
 * creates on each, the order turned round every other round; the median of each is compared.
 * Without taskset (or with one core) nothing is pinned, and it says so.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { cpuMicros, settle } from './bench-http.js';
import { canPin, medianOf, pinSelf, unpinSelf } from './bench-process.js';
import { type DaemonProcess, startDaemonProcess, stopDaemonProcess } from './daemon-process.js';

export type AuditMode = 'off' | 'best-effort' | 'enforced';
export const AUDIT_MODES: AuditMode[] = ['off', 'best-effort', 'enforced'];

export interface AuditRow {
  reqPerSec: number;
  p99ms: number;
  cpuMicros?: number;
  /** Each round's req/s and CPU µs per request, in order (the median above is of these). */
  rounds?: Array<[number, number | undefined]>;
}

export interface AuditBench {
  read: Record<AuditMode, AuditRow>;
  create: Record<AuditMode, AuditRow>;
  pinned: boolean;
  rounds: number;
}

/** `dirs` hold copies of one data dir whose management token is `secret`, one per mode. */
export async function auditBench(dirs: Record<AuditMode, string>, secret: string, options: { seconds: number; rounds: number; connections: number }): Promise<AuditBench> {
  const pinned = canPin();
  const pin = pinned ? '1' : undefined;
  const daemons: Partial<Record<AuditMode, DaemonProcess>> = {};
  try {
    for (const mode of AUDIT_MODES) {
      const config = join(dirs[mode], 'bench-audit.json');
      await writeFile(config, JSON.stringify(mode === 'off' ? { audit_log: false } : { audit_log: true, audit_log_mode: mode }));
      daemons[mode] = await startDaemonProcess(dirs[mode], ['--config', config], undefined, pin);
    }
    if (pinned) pinSelf('0');
    const headers = { 'X-Service-Token': secret };
    const paths: Partial<Record<AuditMode, string>> = {};
    for (const mode of AUDIT_MODES) {
      const self = (await (await fetch(`${(daemons[mode] as DaemonProcess).url}/v1/acl/token/self`, { headers })).json()) as { AccessorID: string };
      paths[mode] = `/v1/acl/token/${self.AccessorID}`;
    }
    const run = async (mode: AuditMode, kind: 'read' | 'create', seconds: number): Promise<AuditRow> => {
      const d = daemons[mode] as DaemonProcess;
      const opts: autocannon.Options =
        kind === 'read'
          ? { url: d.url + paths[mode], headers }
          : { url: `${d.url}/v1/acl/token`, method: 'PUT', headers: { ...headers, 'Content-Type': 'application/json' }, body: '{"Description":"bench"}' };
      await settle(AUDIT_MODES.map((m) => daemons[m]?.proc.pid));
      const before = await cpuMicros(d.proc.pid);
      const r = await autocannon({ connections: options.connections, duration: seconds, ...opts });
      const after = await cpuMicros(d.proc.pid);
      if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0) throw new Error(`${kind} (audit ${mode}): ${r.non2xx} non-2xx answers, ${r.errors} errors, ${r.timeouts} timeouts`);
      return { reqPerSec: Math.round(r.requests.average), p99ms: r.latency.p99, ...(before !== undefined && after !== undefined && r.requests.total > 0 ? { cpuMicros: Math.round((after - before) / r.requests.total) } : {}) };
    };
    for (const mode of AUDIT_MODES) await run(mode, 'read', 2);
    const rounds = Math.max(3, options.rounds);
    const all: Record<string, AuditRow[]> = {};
    for (let i = 0; i < rounds; i++) {
      const order = i % 2 === 0 ? AUDIT_MODES : [...AUDIT_MODES].reverse();
      for (const mode of order) (all[`read ${mode}`] ??= []).push(await run(mode, 'read', options.seconds));
      for (const mode of order) (all[`create ${mode}`] ??= []).push(await run(mode, 'create', options.seconds));
    }
    const med = (key: string): AuditRow => {
      const xs = all[key] ?? [];
      const cpu = xs.flatMap((x) => (x.cpuMicros === undefined ? [] : [x.cpuMicros]));
      return {
        reqPerSec: medianOf(xs.map((x) => x.reqPerSec)),
        p99ms: medianOf(xs.map((x) => x.p99ms)),
        ...(cpu.length > 0 ? { cpuMicros: medianOf(cpu) } : {}),
        rounds: xs.map((x) => [x.reqPerSec, x.cpuMicros]),
      };
    };
    const by = (kind: string) => Object.fromEntries(AUDIT_MODES.map((m) => [m, med(`${kind} ${m}`)])) as Record<AuditMode, AuditRow>;
    return { read: by('read'), create: by('create'), pinned, rounds };
  } finally {
    if (pinned) unpinSelf();
    for (const d of Object.values(daemons)) await stopDaemonProcess(d.proc);
  }
}

/** The floors of docs/audit.md, "Audit log" beside their figures. */
export function auditFloors(r: AuditBench): Array<Record<string, unknown>> {
  // Each round measures every mode back to back: the figure is the median of the rounds' own
  // ratios, so that a slow stretch of a shared machine weighs on both sides of a ratio alike.
  const ratio = (kind: 'read' | 'create', mode: AuditMode): number => {
    const mine = r[kind][mode].rounds;
    const off = r[kind].off.rounds;
    if (!mine || !off || mine.length !== off.length) return r[kind][mode].reqPerSec / r[kind].off.reqPerSec;
    return medianOf(mine.map(([rps], i) => rps / (off[i] as [number, number | undefined])[0]));
  };
  const row = (scenario: string, kind: 'read' | 'create', mode: AuditMode, floor?: number) => ({
    scenario,
    'req/s': r[kind][mode].reqPerSec,
    'p99 ms': r[kind][mode].p99ms,
    'CPU µs/req': r[kind][mode].cpuMicros,
    figure: `${ratio(kind, mode).toFixed(3)}x`,
    floor: floor === undefined ? 'baseline' : `>= ${floor.toFixed(2)}x off`,
    ok: floor === undefined ? '' : ratio(kind, mode) >= floor,
  });
  return [
    row('token read, audit off', 'read', 'off'),
    row('token read, audit best-effort (default)', 'read', 'best-effort', 0.98),
    row('token read, audit enforced', 'read', 'enforced', 0.98),
    row('token create, audit off', 'create', 'off'),
    row('token create, audit best-effort (default)', 'create', 'best-effort', 0.95),
    row('token create, audit enforced', 'create', 'enforced', 0.8),
  ];
}
