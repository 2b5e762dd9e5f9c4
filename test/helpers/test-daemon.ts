import { pino } from 'pino';
import { loadConfig } from '../../src/config/load.js';
import type { ConfigKey } from '../../src/config/schema.js';
import { type Daemon, type DaemonOptions, startDaemon } from '../../src/daemon.js';
import type { Clock } from '../../src/domain/clock.js';
import type { AnswerOf } from './api-types.js';
import { httpCall } from '../../src/testing/http.js';
import { tempDir } from './temp-dir.js';

export const MANAGEMENT_SECRET = 'b1ea1d8e-0000-4000-8000-000000000001';

export interface TestDaemon {
  daemon: Daemon;
  url: string;
  dataDir: string;
  /** Secret of the management token created at start-up. */
  management: string;
  api: Api;
  close(): Promise<void>;
}

export interface ApiResponse<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface ApiOptions {
  token?: string;
  body?: unknown;
  /** Sent as-is instead of JSON-encoding `body`. */
  rawBody?: string;
  headers?: Record<string, string>;
}

/** An HTTP call; its answer typed from method and path (api-types.ts), or as the caller names it. */
export type Api = <T = Unnamed, M extends string = string, P extends string = string>(
  method: M,
  path: P,
  options?: ApiOptions,
) => Promise<ApiResponse<[T] extends [Unnamed] ? AnswerOf<M, P> : T>>;

declare const unnamed: unique symbol;
/** No type named by the caller. */
type Unnamed = { [unnamed]: true };

export function apiFor(url: string, defaultToken?: string): Api {
  return async (method, path, options = {}) => {
    // Errors as JSON, as watchword's own client asks (a Consul client, sending no Accept, gets text).
    const headers: Record<string, string> = { Accept: 'application/json', ...options.headers };
    const token = 'token' in options ? options.token : defaultToken;
    if (token !== undefined) headers['X-Service-Token'] = token;
    let body: string | undefined = options.rawBody;
    if (body === undefined && options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['Content-Type'] ??= 'application/json';
    }
    const res = await httpCall(url + path, { method, headers, ...(body !== undefined ? { body } : {}), timeoutMs: 300_000 });
    const { text } = res;
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed as never, text };
  };
}

/**
 * A secondary's configuration following `primary`: datacenter dc2 (unless `config` names
 * another), no management token of its own, the primary's management token to replicate with
 * (unless `config` gives a replication token).
 */
export function secondaryConfig(
  primary: Pick<TestDaemon, 'url' | 'management'>,
  config: Partial<Record<ConfigKey, unknown>> = {},
): Partial<Record<ConfigKey, unknown>> {
  return {
    datacenter: 'dc2',
    primary_datacenter: 'dc1',
    primary_address: primary.url,
    initial_management_token: undefined,
    replication_token: primary.management,
    ...config,
  };
}

/** A real daemon in this process: real LevelDB in a temp dir, real HTTP on port 0. */
export async function startTestDaemon(
  options: {
    clock?: Clock;
    config?: Partial<Record<ConfigKey, unknown>>;
    logger?: pino.Logger;
    replication?: DaemonOptions['replication'];
    storeFaults?: DaemonOptions['storeFaults'];
  } = {},
): Promise<TestDaemon> {
  const dir = await tempDir();
  const config = loadConfig({
    flags: {
      http_addr: '127.0.0.1:0',
      data_dir: dir.path,
      initial_management_token: MANAGEMENT_SECRET,
      log_level: 'silent',
      node_name: 'test-node',
      ...options.config,
    },
  });
  const daemon = await startDaemon(config, {
    ...(options.clock ? { clock: options.clock } : {}),
    logger: options.logger ?? pino({ level: 'silent' }),
    ...(options.replication ? { replication: options.replication } : {}),
    ...(options.storeFaults ? { storeFaults: options.storeFaults } : {}),
  });
  return {
    daemon,
    url: daemon.url,
    dataDir: dir.path,
    management: MANAGEMENT_SECRET,
    api: apiFor(daemon.url, MANAGEMENT_SECRET),
    async close() {
      await daemon.close();
      await dir.remove();
    },
  };
}

/** Polls `probe` until it returns true; past the deadline, fails naming `what` and the probe's last error. */
export { until } from '../../src/testing/agent-process.js';

/** Polls `check` until it returns true or the deadline passes (then fails naming `what`). */
export async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs = 5000, stepMs = 20, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
