import type { Command, Help, Option } from 'commander';

/**
 * Help in the shape of Consul's CLI: a usage line, the description, examples, then
 * "HTTP API Options" (how to reach a daemon) and "Command Options", every flag written as
 * it is typed, with one dash (`-policy-name=<NAME>`). `--flag` is accepted too.
 */

const WIDTH = 80;

/** Examples by command path (`acl token create`), shown under the description. */
const EXAMPLES: Record<string, string[]> = {
  'acl bootstrap': ['watchword acl bootstrap'],
  'acl token create': [
    'watchword acl token create -description "Replication token" -policy-name acl-replication',
    'watchword acl token create -description "web" -service-identity web:dc1,dc2 -expires-ttl 24h',
    'watchword acl token create -templated-policy builtin/service -var name:api',
  ],
  'acl token read': [
    'watchword acl token read -id 6a53',
    'watchword acl token read -self -token-file ~/.watchword-token',
    'watchword acl token read -id 6a531f0e-5dc5-4a43-8a4e-0d4ee0b1d9a1 -expanded -meta',
  ],
  'acl token update': [
    'watchword acl token update -id 6a53 -description "now for web"',
    'watchword acl token update -id 6a53 -append-policy-name web-read',
    'watchword acl token update -id 6a53 -policy-name only-this-one',
  ],
  'acl token clone': ['watchword acl token clone -id 6a53 -description "a copy"'],
  'acl token delete': ['watchword acl token delete -id 6a53'],
  'acl token list': ['watchword acl token list', 'watchword acl token list -policy-id 1e52 -format json'],
  'acl policy create': [
    'watchword acl policy create -name web-read -rules @web-read.hcl',
    'echo \'acl = "read"\' | watchword acl policy create -name acl-read -rules -',
  ],
  'acl policy read': ['watchword acl policy read -id 1e52', 'watchword acl policy read -name web-read -meta'],
  'acl policy update': [
    'watchword acl policy update -name web-read -rules @web-read.hcl',
    'watchword acl policy update -id 1e52 -name renamed -description "a new name"',
  ],
  'acl policy delete': ['watchword acl policy delete -name web-read'],
  'acl role create': ['watchword acl role create -name web -policy-name web-read -service-identity web'],
  'acl role read': ['watchword acl role read -name web', 'watchword acl role read -id 9c1d -meta'],
  'acl role update': [
    'watchword acl role update -id 9c1d -policy-name also-this',
    'watchword acl role update -id 9c1d -no-merge -policy-name only-this',
  ],
  'acl role delete': ['watchword acl role delete -name web'],
  'acl auth-method create': [
    'watchword acl auth-method create -type jwt -name ci -config @ci-jwt.json',
    'watchword acl auth-method create -type kubernetes -name k8s -kubernetes-host https://k8s:443 -kubernetes-ca-cert @ca.pem ' +
      '-kubernetes-service-account-jwt @reviewer.jwt',
  ],
  'acl binding-rule create': [
    "watchword acl binding-rule create -method ci -bind-type service -bind-name '${value.service}' -selector 'value.team == \"pay\"'",
  ],
  'acl authorize': ['watchword acl authorize -resource service -segment web -access write && deploy'],
  login: ['watchword login -method k8s -bearer-token-file /var/run/secrets/kubernetes.io/serviceaccount/token -token-sink-file ./token'],
  logout: ['watchword logout -token-file ./token'],
  'snapshot save': ['watchword snapshot save backup.snap'],
  'snapshot restore': ['watchword snapshot restore backup.snap'],
  'operator servers': ['watchword operator servers'],
  audit: [
    'watchword audit -type refused -follow',
    'watchword audit -accessor 6a531f0e-5dc5-4a43-8a4e-0d4ee0b1d9a1 -since 2026-11-25T00:00:00Z',
  ],
};

/** The command's path below the program: `acl token create`. */
function pathOf(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** Words wrapped to `width`, each line after `indent`. */
function wrap(text: string, indent: number, width = WIDTH): string[] {
  const out: string[] = [];
  for (const paragraph of text.split('\n')) {
    let line = '';
    for (const word of paragraph.split(/\s+/).filter(Boolean)) {
      if (line && indent + line.length + 1 + word.length > width) {
        out.push(' '.repeat(indent) + line);
        line = word;
      } else line = line ? `${line} ${word}` : word;
    }
    out.push(' '.repeat(indent) + line);
  }
  return out;
}

/** `-name=<VALUE>` (or `-name` for a switch) and what it does, with its default and choices. */
function flag(o: Option): string[] {
  const name = (o.long ?? o.short ?? '').replace(/^--?/, '-');
  const value = /<([^>]+)>|\[([^\]]+)\]/.exec(o.flags);
  const head = `  ${name}${value ? `=<${value[1] ?? value[2]}>` : ''}`;
  let text = o.description;
  if (o.argChoices) text += ` (one of: ${o.argChoices.join(', ')})`;
  if (
    o.defaultValue !== undefined &&
    typeof o.defaultValue !== 'boolean' &&
    !(Array.isArray(o.defaultValue) && o.defaultValue.length === 0)
  )
    text += ` (default: ${String(o.defaultValue)})`;
  return [head, ...wrap(text, 5)];
}

function section(title: string, options: readonly Option[]): string[] {
  if (options.length === 0) return [];
  return ['', title, '', ...options.flatMap((o) => [...flag(o), ''])].slice(0, -1);
}

/** Formats `cmd`'s help (Commander calls it for `-h`, `-help` and `--help`). */
export function consulHelp(cmd: Command, helper: Help, httpFlags: ReadonlySet<string>): string {
  const path = pathOf(cmd);
  const subcommands = helper.visibleCommands(cmd).filter((c) => c.name() !== 'help');
  const args = cmd.registeredArguments.map((a) => (a.required ? a.name() : `[${a.name()}]`)).join(' ');
  const program = cmd.parent ? 'watchword' : cmd.name();
  const usage =
    subcommands.length > 0
      ? `${program}${path ? ` ${path}` : ''} <subcommand> [options] [args]`
      : `${program} ${path} [options]${args ? ` ${args}` : ''}`;
  const lines = [`Usage: ${usage}`, '', ...wrap(cmd.description() || '', 2)];
  const examples = EXAMPLES[path];
  if (examples) lines.push('', '  Examples:', '', ...examples.map((e) => `      $ ${e}`));
  if (subcommands.length > 0) {
    const width = Math.max(...subcommands.map((c) => c.name().length));
    lines.push('', 'Subcommands:');
    for (const c of subcommands) lines.push(`    ${c.name().padEnd(width)}    ${c.description()}`);
  }
  const options = helper.visibleOptions(cmd).filter((o) => o.long !== '--help' && o.long !== '--version');
  // The agent's -http-addr and -datacenter are where it listens and what it is, not how to reach a daemon.
  if (path === 'agent') return `${[...lines, ...section('Agent Options', options)].join('\n')}\n`;
  lines.push(
    ...section(
      'HTTP API Options',
      options.filter((o) => httpFlags.has((o.long ?? '').replace(/^--/, ''))),
    ),
  );
  lines.push(
    ...section(
      'Command Options',
      options.filter((o) => !httpFlags.has((o.long ?? '').replace(/^--/, ''))),
    ),
  );
  return `${lines.join('\n')}\n`;
}
