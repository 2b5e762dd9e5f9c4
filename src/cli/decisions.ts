import type { Command } from 'commander';
import { reasonText } from '../client/index.js';
import { type CommonOptions, common, print, run } from './common.js';
import { ioOf } from './io.js';
import { formatWhoCan } from './output.js';

/**
 * `acl authorize` and `acl who-can`: what a token may do, and who may do something
 * (docs/enforcing-client.md; docs/operator-insight.md, "Who can").
 */
export function decisionCommands(acl: Command): void {
  authorizeCommand(acl);
  whoCanCommand(acl);
}

interface AuthorizeOptions extends CommonOptions {
  resource: string;
  segment?: string;
  access: string;
  explain?: boolean;
}

/**
 * `watchword acl authorize`: may the token (-token, else WATCHWORD_HTTP_TOKEN) do this?
 * Prints allow or deny and exits 0 or 2, so scripts can test with it (docs/enforcing-client.md, "Enforcing policies in your service").
 */
function authorizeCommand(acl: Command): void {
  common(acl.command('authorize').description('ask whether a token may do something: prints allow (exit 0) or deny (exit 2)'))
    .requiredOption(
      '--resource <RESOURCE>',
      'acl, operator, keyring, mesh, peering, agent, event, node, query, session, service, key or intention',
    )
    .option('--segment <NAME>', 'the name the rule is about (service name, key, node, …); required for segmented resources')
    .requiredOption('--access <ACCESS>', 'read, write, or list (key)')
    .option('--explain', 'also print why: the source and rule that decided, and the rule that lost')
    .action(
      run<AuthorizeOptions>(async (o, c) => {
        const [answer] = await c.acl.authorize(
          [{ Resource: o.resource, ...(o.segment !== undefined ? { Segment: o.segment } : {}), Access: o.access }],
          o.explain ? { explain: true } : {},
        );
        if (o.format === 'json') print(o, answer, () => '');
        else ioOf(o).out(`${answer?.Allow ? 'allow' : 'deny'}${answer?.Reason ? `: ${reasonText(answer.Reason)}` : ''}\n`);
        if (!answer?.Allow) ioOf(o).setExitCode(2);
      }),
    );
}

/** `watchword acl who-can`: the tokens and roles granted a check, each with why; every page unless -limit. */
function whoCanCommand(acl: Command): void {
  common(acl.command('who-can').description('list the tokens and roles that may do something, each with the rule that grants it'))
    .requiredOption(
      '--resource <RESOURCE>',
      'acl, operator, keyring, mesh, peering, agent, event, node, query, session, service, key or intention',
    )
    .option('--segment <NAME>', 'the name the rule is about (service name, key, node, …); required for segmented resources')
    .requiredOption('--access <ACCESS>', 'read, write, or list (key)')
    .option('--limit <N>', 'at most this many tokens (all by default)')
    .action(
      run<CommonOptions & { resource: string; segment?: string; access: string; limit?: string }>(async (o, c) => {
        const check = { Resource: o.resource, ...(o.segment !== undefined ? { Segment: o.segment } : {}), Access: o.access };
        const limit = o.limit === undefined ? Number.POSITIVE_INFINITY : Number(o.limit);
        if (!(limit >= 1)) throw new Error('-limit: expected a whole number of at least 1');
        const first = await c.acl.whoCan(check, { limit: Math.min(1000, limit) });
        const answer = { ...first, Tokens: [...first.Tokens] };
        let cursor = first.NextCursor;
        while (cursor !== undefined && answer.Tokens.length < limit) {
          const page = await c.acl.whoCan(check, { limit: Math.min(1000, limit - answer.Tokens.length), cursor });
          answer.Tokens.push(...page.Tokens);
          cursor = page.NextCursor;
        }
        const { NextCursor: _next, Scanned: _scanned, ...shown } = answer;
        print(o, cursor === undefined ? shown : { ...shown, NextCursor: cursor }, formatWhoCan);
      }),
    );
}
