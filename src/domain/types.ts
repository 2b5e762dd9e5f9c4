/**
 * Stored record types, declared once with every field in domain/records.ts. Field names are
 * the wire names (PascalCase, as Consul's API), so a record projects onto a response without
 * renaming. Links are stored by ID only; names are resolved on every read.
 */

export type {
  AuthMethodRecord,
  BindingRuleRecord,
  Link,
  NamedLink,
  NodeIdentity,
  PolicyRecord,
  QuotaRecord,
  RoleRecord,
  ServiceIdentity,
  TemplatedPolicyLink,
  TokenRecord,
} from './records.js';

/** Where an object lives. Every key and uniqueness check includes both. */
export interface Scope {
  /** Admin partition (Enterprise); `default` when unused. */
  Partition: string;
  /** Namespace within the partition (Enterprise); `default` when unused. */
  Namespace: string;
}

/** Cluster-wide bootstrap state, a global object replicated like the others. */
export interface BootstrapState {
  /** True once a bootstrap (or initial management token) happened. */
  Bootstrapped: boolean;
  /** Index of the change that last bootstrapped; the reset index operators write. */
  ResetIndex: number;
}

/** Who made a request, and how: filled at the edge, completed by the service with the caller's accessor. */
export interface AuditActor {
  RequestID: string;
  /** The caller's token: its AccessorID, "anonymous", or "hmac:…" for a secret no token has. */
  AccessorID: string;
  RemoteAddr: string;
  /** The address the request came from when a proven server forwarded it for RemoteAddr (the socket's; RemoteAddr is the client it named). */
  ViaAddr?: string;
  Method: string;
  /** The path, its query without `token`. */
  Path: string;
}
