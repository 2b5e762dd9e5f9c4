import { randomBytes } from 'node:crypto';
import { access, readFile, writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { type CliIO, ioOfCommand, writeSecretFile } from './io.js';

/** `watchword tls …` and `watchword keygen`, shaped like `consul tls …` and `consul keygen`. */

const collect = (value: string, previous: string[]): string[] => [...previous, value];

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

function fail(io: CliIO, message: string): void {
  io.err(`Error: ${message}\n`);
  io.setExitCode(1);
}

function days(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 36_500)
    throw new Error(`-days must be a whole number of days from 1 to 36500, got ${JSON.stringify(value)}`);
  return n;
}

export function tlsCommands(program: Command): void {
  const tls = program.command('tls').description('make a CA and certificates for servers and clients (TLS, server identity)');
  caCommands(tls);
  certCommands(tls);
  program
    .command('keygen')
    .description('print a new server key (32 random bytes, base64) for --server-key')
    .action((_o: unknown, cmd: Command) => {
      ioOfCommand(cmd).out(`${randomBytes(32).toString('base64')}\n`);
    });
}

/** `tls ca create`. */
function caCommands(tls: Command): void {
  const ca = tls.command('ca').description('certificate authority');
  ca.command('create')
    .description('create a CA: <domain>-agent-ca.pem and <domain>-agent-ca-key.pem in the current directory')
    .option('--domain <DOMAIN>', 'domain of the server names the CA signs for', 'watchword')
    .option('--days <N>', 'days the CA is valid', '1825')
    .action(async (o: { domain: string; days: string }, cmd: Command) => {
      const io = ioOfCommand(cmd);
      try {
        const certFile = `${o.domain}-agent-ca.pem`;
        const keyFile = `${o.domain}-agent-ca-key.pem`;
        for (const f of [certFile, keyFile]) if (await exists(f)) return fail(io, `${f} already exists; not overwritten`);
        const { createCA } = await import('../transport/certs.js');
        const issued = await createCA({ domain: o.domain, days: days(o.days) });
        await writeFile(certFile, issued.cert, { mode: 0o644 });
        await writeSecretFile(keyFile, issued.key);
        io.out(`==> Saved ${certFile}\n==> Saved ${keyFile}\n`);
      } catch (err) {
        fail(io, (err as Error).message);
      }
    });
}

/** `tls cert create`. */
function certCommands(tls: Command): void {
  const cert = tls.command('cert').description('certificates signed by the CA');
  cert
    .command('create')
    .description(
      'create a server (server.<dc>.<domain>) or client (client.<dc>.<domain>) certificate: <dc>-<kind>-<domain>-<n>.pem and its -key.pem',
    )
    .option('--server', 'a server certificate (also good as a client of other servers)')
    .option('--client', 'a client certificate')
    .option('--dc <NAME>', 'datacenter of the server or client', 'dc1')
    .option('--domain <DOMAIN>', 'domain of the names', 'watchword')
    .option('--days <N>', 'days the certificate is valid', '365')
    .option('--ca <FILE>', 'the CA certificate (default <domain>-agent-ca.pem)')
    .option('--key <FILE>', "the CA's key (default <domain>-agent-ca-key.pem)")
    .option('--additional-dnsname <NAME>', 'another DNS name (repeatable)', collect, [])
    .option('--additional-ipaddress <IP>', 'another IP address (repeatable)', collect, [])
    .action(
      async (
        o: {
          server?: boolean;
          client?: boolean;
          dc: string;
          domain: string;
          days: string;
          ca?: string;
          key?: string;
          additionalDnsname: string[];
          additionalIpaddress: string[];
        },
        cmd: Command,
      ) => {
        const io = ioOfCommand(cmd);
        try {
          if (Boolean(o.server) === Boolean(o.client)) {
            io.err('Error: give exactly one of -server or -client\n');
            io.setExitCode(2);
            return;
          }
          const kind = o.server ? 'server' : 'client';
          const caFile = o.ca ?? `${o.domain}-agent-ca.pem`;
          const caKeyFile = o.key ?? `${o.domain}-agent-ca-key.pem`;
          const [caCert, caKey] = await Promise.all([readFile(caFile, 'utf8'), readFile(caKeyFile, 'utf8')]).catch(
            (err: NodeJS.ErrnoException) => {
              throw new Error(
                `cannot read the CA (${caFile}, ${caKeyFile}): ${err.code ?? err.message}; make one with: watchword tls ca create`,
              );
            },
          );
          let n = 0;
          while ((await exists(`${o.dc}-${kind}-${o.domain}-${n}.pem`)) || (await exists(`${o.dc}-${kind}-${o.domain}-${n}-key.pem`))) n++;
          const certFile = `${o.dc}-${kind}-${o.domain}-${n}.pem`;
          const keyFile = `${o.dc}-${kind}-${o.domain}-${n}-key.pem`;
          const { createCert } = await import('../transport/certs.js');
          const issued = await createCert(
            { cert: caCert, key: caKey },
            {
              kind,
              datacenter: o.dc,
              domain: o.domain,
              days: days(o.days),
              dnsNames: o.additionalDnsname,
              ipAddresses: o.additionalIpaddress,
            },
          );
          await writeFile(certFile, issued.cert, { mode: 0o644 });
          await writeSecretFile(keyFile, issued.key);
          io.out(`==> Using ${caFile} and ${caKeyFile}\n==> Saved ${certFile}\n==> Saved ${keyFile}\n`);
        } catch (err) {
          fail(io, (err as Error).message);
        }
      },
    );
}
