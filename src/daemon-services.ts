// The use cases a daemon runs (daemon.ts composes them with the store, its place and HTTP): the
// services over the store and the resolver, and what the server's place runs with them.
import type { Logger } from 'pino';
import type { Config } from './config/schema.js';
import type { Placement } from './replication/placement.js';
import type { Clock } from './domain/clock.js';
import type { Reaper } from './reaper/reaper.js';
import type { LastUseFlusher } from './store/last-use.js';
import { Selectors } from './auth/selectors.js';
import { UnknownSecretBudget } from './service/unknown-secrets.js';
import { AclResolver } from './service/acl-resolver.js';
import type { UpgradeStatus } from './upgrade-status.js';
import { BootstrapService } from './service/bootstrap.js';
import { PolicyService } from './service/policies.js';
import { RoleService } from './service/roles.js';
import { TemplatedPolicyService } from './service/templated-policies.js';
import { DecisionService } from './service/decisions.js';
import { WhoCanService } from './service/who-can.js';
import { DryRunService } from './service/dry-run.js';
import { RecentChecks } from './service/recent-checks.js';
import { TokenService } from './service/tokens.js';
import { AuthMethodService } from './service/auth-methods.js';
import { BindingRuleService } from './service/binding-rules.js';
import { QuotaService } from './service/quotas.js';
import { InventoryService } from './service/inventory.js';
import { LoginService } from './service/login.js';
import { SnapshotService } from './service/snapshots.js';
import type { LevelStore } from './store/level-store.js';
import { policyView } from './service/views.js';
import type { ClusterRole, RoleParts } from './ha/cluster-role.js';
import type { AuditLog } from './observability/audit.js';
import { META } from './store/schema.js';
import { randomBytes } from 'node:crypto';
import { GrantLimit } from './service/grant-limit.js';

/** The use cases a daemon runs, as its HTTP routes and its place take them. */
export type Services = ReturnType<typeof buildServices>;

/** The use cases, each over the store and the resolver (which asks the server's place for secrets held elsewhere). */
export function buildServices(
  config: Config,
  deps: {
    store: LevelStore;
    clock: Clock;
    cluster: ClusterRole;
    placement: Placement;
    audit: AuditLog;
    dataDir: string;
    logger: Logger;
    upgrades: UpgradeStatus;
  },
) {
  const { store, clock, cluster, placement, audit, dataDir, logger, upgrades } = deps;
  const primary = () => placement.isPrimary();
  const resolver = new AclResolver(store, clock, {
    datacenter: config.datacenter,
    defaultPolicy: config.default_policy,
    // Secondaries and followers: a secret this server does not hold is asked for where it may have been made.
    ...(cluster.lookupUnknownSecret ? { lookupUnknownSecret: cluster.lookupUnknownSecret } : {}),
    // At a secondary: the primary's silence (undefined at the primary, which nothing makes stale).
    ...(config.replication_max_stale > 0
      ? { staleness: { maxMs: config.replication_max_stale, silentForMs: () => cluster.primarySilentForMs() } }
      : {}),
    onProblem: (message) => logger.warn(message),
    recordUse: (accessor, ms) => store.lastUse.touch(accessor, ms),
    unknownSecrets: new UnknownSecretBudget(config.unknown_secret_rate),
  });
  // Authorizers of tokens a commit wrote or deleted go with them (the store outlives this wiring).
  store.onCommit((event) => resolver.forgetChanged(event.changed));
  const grants = new GrantLimit(config.acl_grant_limit, store, resolver, clock, config.datacenter);
  const tokens = new TokenService(store, resolver, clock, {
    limits: { minTTL: config.token_min_ttl, maxTTL: config.token_max_ttl },
    checkChosenIDs: (ids, local) => cluster.checkChosenIDs(ids, local),
    features: upgrades,
    grants,
  });
  const urls = { allowedHosts: config.auth_method_allowed_hosts };
  // The checks asked within recent_checks_window (decisions here, enforcing clients' reports): what a dry run judges again.
  const recentChecks = new RecentChecks(() => clock.now(), config.recent_checks_window);
  // Binding-rule selectors: regular expressions compiled and run on a thread of their own.
  const selectors = new Selectors();
  return {
    resolver,
    tokens,
    selectors,
    policies: new PolicyService(store, resolver, grants),
    roles: new RoleService(store, resolver, grants),
    templatedPolicies: new TemplatedPolicyService(resolver),
    decisions: new DecisionService(resolver, store, config.recent_checks ? recentChecks : undefined),
    whoCan: new WhoCanService(store, resolver, clock, config.datacenter),
    dryRun: new DryRunService(store, resolver, recentChecks, clock, config.datacenter),
    recentChecks,
    authMethods: new AuthMethodService(store, resolver, { minTTL: config.token_min_ttl, maxTTL: config.token_max_ttl, urls }),
    bindingRules: new BindingRuleService(store, resolver, selectors),
    inventory: new InventoryService(store, resolver, clock),
    quotas: new QuotaService(store, resolver, { minTTL: config.token_min_ttl, maxTTL: config.token_max_ttl }, upgrades),
    login: new LoginService(store, clock, { datacenter: config.datacenter, urls }, selectors),
    snapshots: new SnapshotService(store, resolver, clock, {
      datacenter: config.datacenter,
      primaryDatacenter: () => placement.primaryDatacenter(),
      isPrimary: primary,
      methodLimits: { minTTL: config.token_min_ttl, maxTTL: config.token_max_ttl, urls },
      selectors,
      audit: (type, actor, details) => audit.record(type, actor, 200, details),
    }),
    bootstrap: new BootstrapService(store, tokens, clock, {
      dataDir,
      isPrimary: primary,
      primaryDatacenter: () => placement.primaryDatacenter(),
      primaryAddress: () => placement.now().addresses.join(',') || undefined,
    }),
  };
}

/** What the server's place runs with the services: local views for peers, and what only a leader runs. */
export function buildRoleParts(
  config: Config,
  store: LevelStore,
  services: Services,
  reaper: Reaper,
  lastUse: LastUseFlusher,
  placement: Placement,
): RoleParts {
  const { resolver, tokens, roles, bootstrap } = services;
  return {
    resolver,
    localView: (kind, id) => {
      if (kind === 'token') {
        const t = store.reader.getToken(id);
        return t && tokens.view(t, true);
      }
      if (kind === 'policy') {
        const p = store.reader.getPolicy(id);
        return p && policyView(p);
      }
      const r = store.reader.getRole(id);
      return r && roles.view(r);
    },
    // What only the leader of a datacenter runs besides replication: the built-ins (made by
    // whichever server leads first; a single server leads from the start) and the reaper.
    leaderParts: {
      start: async () => {
        // The key unknown secrets are named by in the audit log: one per datacenter, made by its first leader.
        if (store.getMeta(META.auditKey) === undefined) await store.transact((tx) => tx.putMeta(META.auditKey, randomBytes(32)));
        if (placement.isPrimary()) {
          await bootstrap.ensureBuiltins();
          if (config.initial_management_token) await bootstrap.ensureInitialManagementToken(config.initial_management_token);
        }
        reaper.start();
        lastUse.start();
      },
      stop: async () => {
        await reaper.stop();
        await lastUse.stop();
      },
    },
  };
}
