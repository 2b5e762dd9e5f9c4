// The wire contract of the daemon's own status: GET /v1/agent/self and /v1/agent/health, the
// replication status, this datacenter's servers, the primary followed, and the audit log's pages.
// Re-exported by api/schemas.ts, the one door to the wire contract.
import { z } from 'zod';

export const agentSelfResponse = z
  .object({
    Config: z.object({
      Datacenter: z.string(),
      PrimaryDatacenter: z.string(),
      Role: z.enum(['primary', 'secondary']),
      NodeName: z.string(),
      Version: z.string().describe("This server's release"),
      Protocols: z
        .object({
          Replication: z.tuple([z.number(), z.number()]),
          Servers: z.tuple([z.number(), z.number()]),
          Watch: z.tuple([z.number(), z.number()]),
        })
        .describe('The range [min, max] of each protocol this release speaks with peers'),
      StoreFormats: z.tuple([z.number(), z.number()]).describe('The store formats this release opens [min, max]'),
      HTTPAddr: z.string(),
      AdvertiseAddr: z.string().nullable(),
      DatacenterAddresses: z.record(z.string(), z.string()),
      PrimaryAddress: z.string().nullable(),
      DataDir: z.string(),
      DefaultPolicy: z.enum(['allow', 'deny']),
      TokenMinTTL: z.string(),
      TokenMaxTTL: z.string(),
      ReapInterval: z.string(),
      Durability: z.enum(['fsync', 'os']),
      LogRetention: z.number().int(),
      RateLimit: z.number().describe('Requests per second per client; 0 = no limit'),
      RateLimitPeer: z.number(),
      SecretLookupRate: z.number(),
      MaxBlockingQueries: z.number().int(),
      MaxBlockingQueriesPerClient: z.number().int(),
      HTTPRequestTimeout: z.string(),
      HTTPHeaderTimeout: z.string(),
      HTTPKeepAliveTimeout: z.string(),
      HTTPMaxRequestsPerConn: z.number().int(),
      HTTPMaxConns: z.number().int(),
      LogLevel: z.string(),
      ReplicationTokenSet: z.boolean(),
      InitialManagementTokenSet: z.boolean(),
      Coordinator: z.string().nullable().describe('etcd endpoints; "<hidden>" without operator:read'),
      TLS: z.object({
        Enabled: z.boolean(),
        VerifyIncoming: z.boolean(),
        VerifyOutgoing: z.boolean(),
        VerifyServerHostname: z.boolean(),
        Domain: z.string(),
        MinVersion: z.string().nullable(),
        ServerName: z.string().describe('The name this server proves with its certificate'),
      }),
      ServerKeySet: z.boolean(),
    }),
    Store: z.object({
      Available: z.boolean().describe('false while writes fail (503 STORE_UNAVAILABLE); the store retries by itself'),
      LastError: z.string(),
      UnavailableSince: z.string().nullable(),
    }),
    Stats: z.object({
      Index: z.number().int(),
      Tokens: z.number().int(),
      Roles: z.number().int(),
      Policies: z.number().int(),
      BlockingQueries: z.number().int(),
      /** Bytes of replaced and deleted tokens held in memory until reclaimed (docs/operations.md, "Memory besides the tokens"). */
      TokenGarbageBytes: z.number().int(),
      /** Times those bytes were reclaimed since the daemon started. */
      TokenCompactions: z.number().int(),
    }),
  })
  .meta({ id: 'AgentSelf' });

export type AgentSelfResponse = z.infer<typeof agentSelfResponse>;

export const secondaryInfoResponse = z.object({
  Datacenter: z.string(),
  Address: z.string(),
  AckedIndex: z.number().int(),
  LagEntries: z.number().int(),
  LastContactMs: z.number().int(),
  ConnectedAt: z.string(),
});

export const replicationStatusResponse = z
  .object({
    Enabled: z.boolean(),
    Running: z.boolean(),
    SourceDatacenter: z.string(),
    ReplicationType: z.string(),
    ReplicatedIndex: z.number().int(),
    ReplicatedRoleIndex: z.number().int(),
    ReplicatedTokenIndex: z.number().int(),
    LastSuccess: z.string(),
    LastError: z.string(),
    LastErrorMessage: z.string(),
    Connected: z.boolean(),
    PrimaryIndex: z.number().int(),
    LagEntries: z.number().int(),
    LastContactMs: z.number().int(),
    Secondaries: z.array(secondaryInfoResponse).optional().describe('On the primary: each connected secondary'),
    SecretConflicts: z
      .array(z.object({ AccessorID: z.string(), LocalAccessorID: z.string() }))
      .optional()
      .describe('On a secondary: global tokens not applied because a Local token here holds their secret'),
    MaxStaleMs: z.number().int().optional().describe('On a secondary with replication_max_stale: the bound, ms'),
    RefusingGlobalTokens: z
      .boolean()
      .optional()
      .describe(
        'On a secondary with replication_max_stale: true while the primary has been silent for longer, so global tokens are refused',
      ),
  })
  .meta({ id: 'ReplicationStatus' });

export type ReplicationStatusResponse = z.infer<typeof replicationStatusResponse>;

export const serverStatusResponse = z
  .object({
    Name: z.string(),
    Address: z.string().describe('HTTP address, host:port'),
    Role: z.enum(['leader', 'follower']),
    Term: z.number().int().describe('Leadership term this server knows'),
    AppliedSeq: z.number().int().describe('Last server batch durable on that server'),
    AppliedIndex: z.number().int().nullable().describe('Index of the state it holds (X-Service-Index), when known'),
    LagBatches: z.number().int(),
    InSyncSet: z.boolean(),
    Connected: z.boolean().describe("Streaming from the leader (the leader's own row: true)"),
    Registered: z.boolean().describe('Its registration is live in the coordinator; false: a server seen before that is down or cut off'),
    Release: z.string().nullable().optional().describe('The release it runs (null: not heard from)'),
    Protocols: z
      .object({ Replication: z.tuple([z.number(), z.number()]), Servers: z.tuple([z.number(), z.number()]) })
      .nullable()
      .optional()
      .describe("The replication and servers' stream versions it speaks, [min, max]"),
  })
  .meta({ id: 'ServerStatus' });

export const operatorServersResponse = z
  .object({
    Datacenter: z.string(),
    Leader: z.string().nullable().describe('Address of the leader, null while none is known'),
    Term: z.number().int(),
    SyncSet: z.array(z.string()).describe('Names of the published synchronous followers'),
    RunningWithoutSyncCopy: z.boolean().describe('The leader acknowledges writes that no other server holds'),
    Problem: z
      .string()
      .nullable()
      .describe(
        'What keeps this datacenter from a working leader as this server sees it: the coordinator out of reach, or a leader named there ' +
          'that has refused this server for longer than a lease',
      ),
    Servers: z.array(serverStatusResponse),
    AnsweredBy: z.string().describe("The server whose view this is: the leader's, wherever it was asked, unless no leader answered"),
  })
  .meta({ id: 'OperatorServers' });

export type ServerStatus = z.infer<typeof serverStatusResponse>;
export type OperatorServersResponse = z.infer<typeof operatorServersResponse>;

/** GET /v1/operator/primary: the primary this server follows (docs/datacenters.md, "Multiple datacenters"). */
export const operatorPrimaryResponse = z.object({
  Datacenter: z.string().describe('The primary datacenter (this one at the primary)'),
  Epoch: z.number().int().describe("The primary's epoch: 1 for the first primary, raised by each promotion"),
  Index: z.number().int().describe('The last primary index applied here (at the primary: its current index)'),
  LastContact: z
    .string()
    .optional()
    .describe('When the primary was last heard here (RFC 3339); absent at the primary, and before it was first heard'),
});
export type OperatorPrimaryResponse = z.infer<typeof operatorPrimaryResponse>;

/** PUT /v1/operator/primary?promote: what the promotion took over, and what may be lost (docs/datacenters.md). */
export const promotionResponse = z.object({
  Datacenter: z.string().describe('The new primary datacenter (this one)'),
  Epoch: z.number().int().describe('Its epoch: one above the highest seen before'),
  PreviousPrimary: z.string().describe('The primary it replaces'),
  PreviousEpoch: z.number().int(),
  LastIndex: z.number().int().describe('The last index of the previous primary applied here: the recovery point'),
  LastContact: z.string().optional().describe('When the previous primary was last heard here (RFC 3339); absent if it never was'),
  Forced: z.boolean().describe('Whether the previous primary was still heard (-force)'),
  WritesPausedMs: z.number().int().optional().describe('A planned transfer: how long ACL writes were refused at the old primary'),
  Warning: z.string().describe('What may be lost, in plain words'),
});
export type PromotionResponse = z.infer<typeof promotionResponse>;

/** GET /v1/internal/primary: the primary a server follows, asked by peers learning of a newer one (docs/datacenters.md). */
export const primaryPlacementResponse = z.object({
  Datacenter: z.string().describe('The answering datacenter'),
  Primary: z.string().describe('The primary it follows (itself at the primary)'),
  Epoch: z.number().int().positive(),
  Addresses: z.array(z.string()).describe("The primary's servers, as this datacenter reaches them"),
});
export type PrimaryPlacementResponse = z.infer<typeof primaryPlacementResponse>;

/** GET /v1/agent/health: whether this server can do its job, check by check. */
export const agentHealthResponse = z.object({
  Status: z.enum(['passing', 'critical']),
  Checks: z.array(z.object({ Name: z.string(), Passing: z.boolean(), Output: z.string().optional() })),
});
export type AgentHealthResponse = z.infer<typeof agentHealthResponse>;

/** GET /v1/operator/audit: a page of audit events (docs/audit.md, "Audit log"). */
export const auditPageResponse = z.object({
  // Every event carries these; each type adds its own fields (docs/audit.md).
  Events: z.array(
    z.looseObject({ Time: z.string(), Type: z.string(), AccessorID: z.string(), RemoteAddr: z.string(), Status: z.number() }),
  ),
  NextCursor: z.string().optional(),
  Latest: z.number().int(),
});
export type AuditPageResponse = z.infer<typeof auditPageResponse>;

/** GET /v1/operator/upgrade: every server's release and versions, what finalize would set, and what waits (docs/upgrading.md, "Upgrading"). */
export const operatorUpgradeResponse = z
  .object({
    Release: z.string().describe('The release of the server that answered'),
    Finalized: z
      .object({ Release: z.string(), Replication: z.number(), Servers: z.number() })
      .nullable()
      .describe('The level the cluster was finalized at (null: not yet; a data dir of the previous release)'),
    Datacenters: z.array(
      z.object({
        Datacenter: z.string(),
        Partial: z.boolean().describe('Its leader runs an older release that reports only itself'),
        LastReport: z.string().describe('When its leader last reported (RFC 3339)'),
        Servers: z.array(
          z.object({
            Name: z.string(),
            Release: z.string().nullable().describe('null: not heard from'),
            Replication: z.tuple([z.number(), z.number()]).nullable(),
            Servers: z.tuple([z.number(), z.number()]).nullable(),
          }),
        ),
      }),
    ),
    Level: z
      .object({ Release: z.string(), Replication: z.number(), Servers: z.number() })
      .nullable()
      .describe('What every server reaches now: what a finalize would set (null while a server is not heard from)'),
    Behind: z.array(z.string()).describe("Servers (dc/name (release)) below this server's release, or not heard from"),
    CanFinalize: z.boolean(),
    Waiting: z
      .array(z.object({ Feature: z.string(), Needs: z.string(), Behind: z.array(z.string()) }))
      .describe('Features that need every server, off until the upgrade is finalized at a level that has them'),
  })
  .meta({ id: 'OperatorUpgrade' });
export type OperatorUpgradeResponse = z.infer<typeof operatorUpgradeResponse>;

/** POST /v1/operator/raft/transfer-leader: Consul's answer (`Success`), and who handed the lead to whom. */
export const transferLeaderResponse = z
  .object({
    Success: z.boolean(),
    From: z.string().describe('The server that led'),
    To: z.string().describe('The server that leads now (a member of the synchronous set: it holds every acknowledged write)'),
    Term: z.number().int().describe('The new leadership term'),
  })
  .meta({ id: 'TransferLeader' });
export type TransferLeaderResponse = z.infer<typeof transferLeaderResponse>;

const counts = (what: string) => z.record(z.string(), z.number().int()).describe(`Live tokens by ${what}`);

/** GET /v1/acl/inventory (docs/http-api.md, "Inventory"). */
export const inventoryResponse = z
  .object({
    Tokens: z.number().int().describe('Live tokens held in this datacenter (expired ones until reaped)'),
    Local: z.number().int(),
    Global: z.number().int(),
    ByAuthMethod: counts('the auth method whose login made them ("": made through the token API)'),
    ByRole: counts('role they link (namespace/name outside the default namespace)'),
    ByPolicy: counts('policy they link (namespace/name outside the default namespace)'),
    ByNamespace: counts('namespace'),
    ByPartition: counts('admin partition'),
    ExpiringWithin1h: z.number().int(),
    ExpiringWithin24h: z.number().int(),
    NeverUsed: z.number().int().describe('Tokens with no known use'),
    UnusedFor30d: z.number().int().describe('Tokens neither used nor made since the hour 30 days ago'),
    ACLWriteHolders: z.number().int().describe('Tokens whose rules grant acl:write somewhere (every token when default_policy is allow)'),
    Quotas: z.array(z.object({ ID: z.string(), Name: z.string(), Used: z.number().int(), MaxTokens: z.number().int().optional() })),
  })
  .meta({ id: 'Inventory' });
export type InventoryResponse = z.infer<typeof inventoryResponse>;
