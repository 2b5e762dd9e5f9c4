import { chmod, mkdir, readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { type Config, isPrimary } from './config/schema.js';
import { type AuditSettings, AuditLog } from './observability/audit.js';
import { Metrics } from './observability/metrics.js';
import { holdDataDirLock } from './store/data-dir-lock.js';
import { LevelStore, type LevelStoreOptions } from './store/level-store.js';
import { META } from './store/schema.js';

/**
 * What a daemon keeps in its data dir, opened in order before anything else runs (daemon.ts):
 * the dir itself (0700, its files 0600) and its lock, the store, the audit log and the metrics
 * over the store.
 */

/** The audit log's settings from the configuration. */
export function auditSettings(config: Config, dataDir: string): AuditSettings {
  return {
    enabled: config.audit_log,
    path: config.audit_log_path ? resolve(config.audit_log_path) : join(dataDir, 'audit', 'audit.log'),
    mode: config.audit_log_mode,
    rotateBytes: config.audit_log_rotate_bytes,
    maxFiles: config.audit_log_rotate_max_files,
  };
}

/**
 * The data dir (0700, its files 0600) and its lock (held until the daemon has closed everything
 * in it), the store in it, the audit log (open before anything can change) and the metrics.
 */
export async function openDataDir(config: Config, dataDir: string, storeFaults: LevelStoreOptions['faults'], logger: Logger) {
  // Secrets live in the store: nothing the daemon creates is readable by other users.
  process.umask(0o077);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const lock = await holdDataDirLock(dataDir);
  try {
    return { lock, ...(await openInLockedDir(config, dataDir, storeFaults, logger)) };
  } catch (err) {
    await lock.release().catch(() => undefined);
    throw err;
  }
}

async function openInLockedDir(config: Config, dataDir: string, storeFaults: LevelStoreOptions['faults'], logger: Logger) {
  await restrictModes(dataDir);
  let metricsRef: Metrics | undefined;
  const opening = performance.now();
  const store = await LevelStore.open(join(dataDir, 'store'), {
    durability: config.durability,
    onCheckpointFailed: (err) =>
      logger.warn({ err }, 'store: the checkpoint was not written; the next start reads every token from LevelDB'),
    changeLog: isPrimary(config),
    datacenter: config.datacenter,
    ...(storeFaults ? { faults: storeFaults } : {}),
    onAvailability: (available, cause) => {
      metricsRef?.storeAvailable.set(available ? 1 : 0);
      if (available) logger.info('store: writes succeed again; accepting writes');
      else logger.error({ err: cause }, 'store: a write failed; refusing writes (503) and retrying until the disk accepts them');
    },
  });
  logger.info(`store: opened in ${Math.round(performance.now() - opening)} ms, tokens read from ${store.tokensFrom ?? 'a scan'}`);
  const audit = new AuditLog(
    auditSettings(config, dataDir),
    { datacenter: config.datacenter, server: config.node_name },
    logger,
    () => store.getMeta(META.auditKey) as Uint8Array | undefined,
  );
  try {
    await audit.open();
  } catch (err) {
    await store.close();
    throw new Error(`cannot open the audit log ${auditSettings(config, dataDir).path}: ${(err as Error).message}`);
  }
  if (!config.audit_log) logger.warn('the audit log is off (audit_log = false): ACL changes and refusals are not recorded');
  store.setAudit(config.audit_log ? audit : undefined);
  const metrics = new Metrics(store);
  metricsRef = metrics;
  return { store, audit, metrics };
}

/** Data dir and everything in it: directories 0700, files 0600 (data dirs made by older versions too). */
async function restrictModes(dir: string): Promise<void> {
  await chmod(dir, 0o700);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await restrictModes(path);
    else if (entry.isFile()) await chmod(path, 0o600);
  }
}
