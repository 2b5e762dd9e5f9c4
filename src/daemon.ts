import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { type Config, isPrimary, parseHostPort } from './config/schema.js';
import { type Clock, systemClock } from './domain/clock.js';
import { ReadGate } from './http/blocking.js';
import { buildApp } from './http/app.js';
import { formatDuration } from './domain/duration.js';
import { createAgentLogger } from './observability/logger.js';
import { Metrics } from './observability/metrics.js';
import { Reaper } from './reaper/reaper.js';
import { AclResolver } from './service/acl-resolver.js';
import { BootstrapService } from './service/bootstrap.js';
import type { AgentInfo } from './service/context.js';
import { PolicyService } from './service/policies.js';
import { RoleService } from './service/roles.js';
import { TemplatedPolicyService } from './service/templated-policies.js';
import { TokenService } from './service/tokens.js';
import { LevelStore } from './store/level-store.js';

export interface Daemon {
  readonly config: Config;
  readonly metrics: Metrics;
  readonly app: FastifyInstance;
  readonly store: LevelStore;
  /** host:port the HTTP API is bound to. */
  readonly address: string;
  readonly url: string;
  readonly reaper: Reaper;
  close(): Promise<void>;
}

export interface DaemonOptions {
  clock?: Clock;
  logger?: Logger;
}

/** Version of this build, reported by /v1/agent/self. */
export const VERSION = '0.1.0';

/** /v1/agent/self: the configuration without secrets (only whether they are set), version and role. */
function agentSelf(config: Config, address: string, store: LevelStore, metrics: Metrics) {
  return {
    Config: {
      Datacenter: config.datacenter,
      PrimaryDatacenter: config.primary_datacenter,
      Role: isPrimary(config) ? 'primary' : 'secondary',
      NodeName: config.node_name,
      Version: VERSION,
      HTTPAddr: address,
      PrimaryAddress: config.primary_address ?? null,
      DataDir: resolve(config.data_dir),
      DefaultPolicy: config.default_policy,
      TokenMinTTL: formatDuration(config.token_min_ttl),
      TokenMaxTTL: formatDuration(config.token_max_ttl),
      ReapInterval: formatDuration(config.reap_interval),
      Durability: config.durability,
      LogRetention: config.log_retention,
      LogLevel: config.log_level,
      ReplicationTokenSet: config.replication_token !== undefined,
      InitialManagementTokenSet: config.initial_management_token !== undefined,
    },
    Stats: {
      Index: store.currentIndex(),
      Tokens: store.count('tokens'),
      Roles: store.count('roles'),
      Policies: store.count('policies'),
      BlockingQueries: metrics.blockingInFlight(),
    },
  };
}

/**
 * The composition root: opens the store, builds services, HTTP and the reaper, and
 * starts them in order. Nothing serves before the store is open; close() stops in the
 * reverse order and leaves the store flushed.
 */
export async function startDaemon(config: Config, options: DaemonOptions = {}): Promise<Daemon> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createAgentLogger(config.log_level);
  const primary = isPrimary(config);
  const dataDir = resolve(config.data_dir);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await chmod(dataDir, 0o700);

  const store = await LevelStore.open(join(dataDir, 'store'), { durability: config.durability, changeLog: primary });
  let address = '';
  try {
    const resolver = new AclResolver(store.reader, clock, { datacenter: config.datacenter, defaultPolicy: config.default_policy });
    const tokens = new TokenService(store, resolver, clock, { limits: { minTTL: config.token_min_ttl, maxTTL: config.token_max_ttl } });
    const policies = new PolicyService(store, resolver);
    const roles = new RoleService(store, resolver);
    const templatedPolicies = new TemplatedPolicyService(resolver);
    const bootstrap = new BootstrapService(store, tokens, clock, {
      dataDir,
      isPrimary: primary,
      primaryDatacenter: config.primary_datacenter,
      ...(config.primary_address ? { primaryAddress: config.primary_address } : {}),
    });
    if (primary) {
      await bootstrap.ensureBuiltins();
      if (config.initial_management_token) await bootstrap.ensureInitialManagementToken(config.initial_management_token);
    }

    const metrics = new Metrics(store);
    const agent: AgentInfo = {
      datacenter: config.datacenter,
      primaryDatacenter: config.primary_datacenter,
      nodeName: config.node_name,
      version: VERSION,
      defaultPolicy: config.default_policy,
      downPolicy: 'extend-cache',
      address: () => address,
      knownLeader: () => primary,
      lastContactMs: () => 0,
      datacenters: () => [config.primary_datacenter, ...(primary ? [] : [config.datacenter])],
      self: () => agentSelf(config, address, store, metrics),
    };
    const reads = new ReadGate(store, metrics);
    const { app } = buildApp({ store, tokens, policies, roles, templatedPolicies, bootstrap, agent, reads, metrics, logger });

    const reaper = new Reaper(store, clock, {
      interval: config.reap_interval,
      isPrimary: primary,
      onReaped: (count) => {
        metrics.reaped.inc(count);
        logger.info({ count }, 'reaped expired tokens');
      },
      onError: (err) => logger.error({ err }, 'reaper pass failed'),
    });

    const { host, port } = parseHostPort(config.http_addr) as { host: string; port: number };
    await app.listen({ host, port });
    const bound = app.server.address();
    const boundPort = typeof bound === 'object' && bound ? bound.port : port;
    address = `${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
    await writeFile(join(dataDir, 'http-addr'), `${address}\n`, { mode: 0o600 });
    reaper.start();
    logger.info({ address, datacenter: config.datacenter, primary: config.primary_datacenter, role: primary ? 'primary' : 'secondary', dataDir }, 'watchword agent started');

    let closing: Promise<void> | undefined;
    return {
      config,
      metrics,
      app,
      store,
      address,
      url: `http://${address}`,
      reaper,
      close() {
        closing ??= (async () => {
          reads.shutdown();
          await app.close();
          await reaper.stop();
          await store.close();
          logger.info('watchword agent stopped');
        })();
        return closing;
      },
    };
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
}
