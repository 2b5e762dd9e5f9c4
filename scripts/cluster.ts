/**
 * npm run cluster -- [dc1 dc2 dc3] [--tls]: starts a throw-away multi-datacenter cluster
 * (child processes, ephemeral loopback ports, temp data dirs), prints each
 * datacenter's URL and the management token, and keeps running until Ctrl-C, when it
 * stops every daemon and removes the data dirs. With --tls every daemon speaks HTTPS
 * with certificates made for the run, and the CA file for the CLI is printed.
 */
import { startCluster } from '../src/testing/index.js';

const names = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const datacenters = names.length > 0 ? names : ['dc1', 'dc2', 'dc3'];
const tls = process.argv.includes('--tls');
const cluster = await startCluster({ datacenters, tls, logLevel: process.env.WATCHWORD_LOG_LEVEL ?? 'warn' });
await cluster.waitForReplication();
process.stdout.write(`management token: ${cluster.managementToken}\n`);
for (const d of cluster.datacenters) process.stdout.write(`${d.name.padEnd(6)} ${d.isPrimary ? 'primary  ' : 'secondary'} ${d.url}   data: ${d.dataDir}\n`);
const ca = cluster.tls ? ` WATCHWORD_CACERT=${cluster.tls.caFile}` : '';
process.stdout.write(`\nexport WATCHWORD_HTTP_ADDR=${cluster.primary.url} WATCHWORD_HTTP_TOKEN=${cluster.managementToken}${ca}\n(Ctrl-C stops the cluster and removes its data)\n`);
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await cluster.stop();
  process.exit(0);
};
// Any signal that would end this process ends the cluster first (its daemons, their data).
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void stop());
// npm passes on SIGINT and SIGTERM only: a parent that dies of another signal leaves this process to
// init, which is taken as the signal it was sent.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) void stop();
}, 250);
