import type { Command } from 'commander';
import type { AuditPage, AuditQuery } from '../client/index.js';
import { type CommonOptions, common, print, run } from './common.js';
import { ioOf } from './io.js';
import { table } from './output.js';

interface AuditOptions extends CommonOptions {
  type?: string;
  accessor?: string;
  kind?: string;
  id?: string;
  since?: string;
  until?: string;
  limit?: string;
  follow?: boolean;
}

type Event = AuditPage['Events'][number];

/** What an event changed, in a few words. */
function objects(e: Event): string {
  const list = (e.Objects as Array<{ Kind: string; ID: string; Deleted?: boolean }> | undefined) ?? [];
  const more = Number(e.MoreObjects ?? 0);
  const shown = list.slice(0, 2).map((o) => `${o.Deleted ? '-' : ''}${o.Kind} ${o.ID}`);
  const rest = list.length - shown.length + more;
  return [...shown, ...(rest > 0 ? [`+${rest} more`] : [])].join(', ') || String(e.Reason ?? e.Code ?? '');
}

export function formatAudit(events: Event[]): string {
  return table(
    ['Time', 'Type', 'Accessor', 'Remote', 'Status', 'Objects'],
    events.map((e) => [e.Time, e.Type, e.AccessorID, e.RemoteAddr || '-', String(e.Status), objects(e)]),
  );
}

/** `watchword audit`: this server's recent audit events; `-follow` prints new ones as they come. */
export function auditCommand(program: Command): void {
  common(
    program
      .command('audit')
      .description("show the server's recent audit events, newest first (operator:read and acl:read)")
      .option('--type <TYPE>', 'only this event type (token-create, refused, login, …)')
      .option('--accessor <ID>', "only this caller's events (AccessorID, or hmac:… for an unknown secret)")
      .option('--kind <KIND>', 'only events that changed this kind of object (token, policy, role, auth-method, binding-rule)')
      .option('--id <ID>', 'only events that changed this object')
      .option('--since <TIME>', 'events at or after this time (RFC 3339)')
      .option('--until <TIME>', 'events at or before this time (RFC 3339)')
      .option('--limit <N>', 'at most this many (default 100, at most 1000)')
      .option('--follow', 'keep printing new events as they happen (Ctrl-C to stop)'),
  ).action(
    run<AuditOptions>(async (o, c) => {
      const query: AuditQuery = {
        ...(o.type ? { type: o.type } : {}),
        ...(o.accessor ? { accessor: o.accessor } : {}),
        ...(o.kind ? { kind: o.kind } : {}),
        ...(o.id ? { id: o.id } : {}),
        ...(o.since ? { since: o.since } : {}),
        ...(o.until ? { until: o.until } : {}),
        ...(o.limit ? { limit: Number(o.limit) } : {}),
      };
      const page = await c.operator.audit(query);
      if (!o.follow) return print(o, page.Events, formatAudit);
      // Oldest first, then each new event as it comes (polled once a second).
      const io = ioOf(o);
      const show = (events: Event[]) => {
        for (const e of events) io.out(`${o.format === 'json' ? JSON.stringify(e) : formatAudit([e]).split('\n').slice(1).join('\n')}\n`);
      };
      if (o.format !== 'json') io.out(`${formatAudit([]).split('\n')[0]}\n`);
      show([...page.Events].reverse());
      let latest = page.Latest;
      for (;;) {
        await new Promise((r) => setTimeout(r, 1000));
        const next = await c.operator.audit({ after: latest, limit: 1000 });
        const wanted = next.Events.filter((e) => (!o.type || e.Type === o.type) && (!o.accessor || e.AccessorID === o.accessor));
        show(wanted);
        latest = next.Latest;
      }
    }),
  );
}
