import type { ReplicationStatusResponse, WatchwordClient } from '../client/index.js';
import type { EtcdTLS } from './etcd.js';

// The harness's shared shapes: what startCluster takes and gives, and what each daemon handle offers.

export interface ClusterOptions {
  /**
   * Datacenter names, the first the primary: `['dc1', 'dc2']`, or with servers per
   * datacenter, `{ dc1: { servers: 3 }, dc2: { servers: 1 } }` (keys in order).
   */
  datacenters: string[] | Record<string, { servers?: number }>;
  /** Secret of the management token (created on the primary at start-up); random by default. */
  managementToken?: string;
  /** Extra agent flags for every daemon, by config key: `{ token_min_ttl: '1s' }`. */
  config?: Record<string, string | number>;
  /**
   * `test` (default): reconnections between datacenters back off from 100 ms to 2 s, so a
   * test that does not measure them does not wait on them. `production`: the daemon's defaults
   * (250 ms to 2 s), for runs that measure convergence (npm run chaos, npm run failover).
   */
  timings?: 'test' | 'production';
  /**
   * Where a server's data dir is made (by server name: `dc1-server-3`, or `dc2-node` for a
   * single-server datacenter): a folder under which a temp dir is created, e.g. a small tmpfs
   * a run fills to test a full disk. Elsewhere: the system's temp dir.
   */
  dataDirParent?: Record<string, string>;
  /**
   * Every daemon is told every other datacenter's address (`datacenter_addresses`, each
   * datacenter's first server), as in a deployment that may promote a secondary (docs/datacenters.md): ports
   * are chosen before any starts. Plain HTTP only.
   */
  knowEachOther?: boolean;
  /** Where etcd's data dir is made (a LazyFS mount for power cuts); the system's temp dir by default. */
  etcdDirParent?: string;
  /** Extra agent flags for one datacenter. */
  configFor?: Record<string, Record<string, string | number>>;
  /** Log level of the daemons (default warn); their output is kept on each handle. */
  logLevel?: string;
  /**
   * Route each secondary's traffic to the primary (replication and forwarded writes)
   * through TCP proxies the test can cut and restore (cluster.link(name)): one per server of
   * the primary datacenter, all given to the secondary as its primary addresses.
   */
  links?: boolean;
  /** Servers (by server name: `dc2-node`, `dc1-server-2`) that run another build's `dist/main.js` from their first start. */
  programs?: Record<string, string>;
  /** Environment variables of some servers (by server name), beyond the harness's own: a test build's flag. */
  envFor?: Record<string, Record<string, string>>;
  /** How long a daemon may take to start, ms (default 30 s). */
  startTimeoutMs?: number;
  /**
   * Servers per datacenter, by name (default 1; the object form of `datacenters` says it
   * too). With more than one anywhere, the harness starts
   * an etcd of its own (Debian's etcd-server) and every server of such a datacenter
   * elects its leader through it, each over a link the test can cut (coordinatorLink).
   */
  servers?: Record<string, number>;
  /**
   * TLS everywhere (docs/tls.md, "TLS"): the harness makes a CA, a certificate per server (naming
   * server.<dc>.watchword), one for etcd (which then requires client certificates), and a
   * client certificate for the caller (cluster.tls). `verifyIncoming` makes every daemon
   * require client certificates of HTTPS clients too.
   */
  tls?: boolean | { verifyIncoming?: boolean };
}

/** The CA and a client certificate of a cluster started with `tls`, as files and PEM text. */
export interface ClusterTLS extends EtcdTLS {
  /** Where the files are (removed with the cluster). */
  dir: string;
}

export interface DatacenterHandle {
  readonly name: string;
  readonly isPrimary: boolean;
  /** http://host:port of the daemon (stable across restarts). */
  readonly url: string;
  readonly dataDir: string;
  /** A client for this daemon, holding the management token. */
  readonly client: WatchwordClient;
  /** PID of the running daemon, or undefined while stopped. */
  readonly pid: number | undefined;
  /** What the daemon printed (stdout and stderr), across restarts. */
  output(): string;
  /** SIGTERM, and wait for a clean exit. */
  stop(): Promise<number | null>;
  /** SIGKILL, and wait for the process to be gone. */
  kill(): Promise<void>;
  /** Start again on the same data dir and port (after stop or kill). */
  start(): Promise<void>;
  /** stop() then start(). */
  restart(): Promise<void>;
  /** This datacenter's replication status. */
  replication(): Promise<ReplicationStatusResponse>;
  /** Every server of this datacenter (this handle is the first); one for a single-server datacenter. */
  readonly servers: DatacenterHandle[];
  /** The server's name (node name). */
  readonly serverName: string;
  /** The running server that leads this datacenter now (asks the servers). */
  leader(timeoutMs?: number): Promise<DatacenterHandle>;
  /**
   * The program this server runs from its next start: another build's `dist/main.js` (an older
   * release, for upgrade and rollback tests: testing/previous-release.ts), or undefined for this one.
   */
  program: string | undefined;
  /** Environment variables this server gets from its next start, beyond the harness's own (a test build's flag). */
  env: Record<string, string> | undefined;
  /** Resolves once this secondary has applied the primary's current index. */
  waitForReplication(timeoutMs?: number): Promise<void>;
}

/** The network link from a secondary to the primary (with `links: true`). */
export interface LinkHandle {
  /** Resets every open connection and refuses new ones: the secondary is cut off from the primary. */
  cut(): void;
  restore(): void;
  readonly isCut: boolean;
}

/** The etcd a cluster with a multi-server datacenter runs. */
export interface CoordinatorHandle {
  readonly url: string;
  /** Where etcd's peers reach it (a single-member cluster still listens there). */
  readonly peerURL: string;
  readonly dataDir: string;
  /** SIGKILL of etcd (a crash); its data dir stays. */
  kill(): Promise<void>;
  /** Starts it again on the same data dir and port. */
  start(): Promise<void>;
}

export interface Cluster {
  readonly datacenters: DatacenterHandle[];
  readonly primary: DatacenterHandle;
  readonly managementToken: string;
  get(name: string): DatacenterHandle;
  /** The link from a secondary to the primary; needs `links: true`. */
  link(secondary: string): LinkHandle;
  /** The etcd this cluster started (when a datacenter has several servers). */
  readonly coordinator: CoordinatorHandle | undefined;
  /** The link from one server (by server name) to the coordinator, for servers of a multi-server datacenter. */
  coordinatorLink(serverName: string): LinkHandle;
  /** The key the servers of a multi-server datacenter prove themselves to each other with (base64). */
  serverKeyOf(datacenter: string): string;
  /** With `tls`: the CA and a client certificate (client.<primary dc>.watchword). */
  readonly tls: ClusterTLS | undefined;
  /**
   * With `tls`: a new certificate and key for one server (or `etcd`), written over its files
   * (`<tls.dir>/<serverName>.pem` and `-key.pem`); SIGHUP makes a daemon use them.
   */
  renewCertificate(serverName: string): Promise<{ certFile: string; keyFile: string; cert: string }>;
  /** fetch that trusts the cluster's CA and presents its client certificate (the platform's fetch without TLS). */
  fetch(url: string, init?: RequestInit): Promise<Response>;
  /** Resolves once every running secondary has applied the primary's current index. */
  waitForReplication(timeoutMs?: number): Promise<void>;
  /** Stops every daemon and removes the data dirs. */
  stop(): Promise<void>;
}
