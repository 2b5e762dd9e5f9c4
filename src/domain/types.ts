/**
 * Stored record types. Field names are the wire names (PascalCase, as Consul's API),
 * so a record projects onto a response without renaming. Links are stored by ID only;
 * names are resolved on every read.
 */

/** A link from a token or role to a policy or role, by ID. */
export interface Link {
  /** ID of the linked object. */
  ID: string;
}

/** A link as returned: the ID plus the name resolved at read time. */
export interface NamedLink {
  ID: string;
  Name: string;
}

export interface ServiceIdentity {
  /** Service the identity grants access as. */
  ServiceName: string;
  /** Datacenters the synthetic policy is valid in; absent means all. */
  Datacenters?: string[];
}

export interface NodeIdentity {
  /** Node the identity grants access as. */
  NodeName: string;
  /** The one datacenter the synthetic policy is valid in. */
  Datacenter: string;
}

export interface TemplatedPolicyLink {
  /** Name of a built-in templated policy, e.g. `builtin/service`. */
  TemplateName: string;
  /**
   * Variables for the template; `name` when the template needs one (Consul's JSON name for
   * its Name field; any letter case is accepted on input, and `Name` in records written before).
   */
  TemplateVariables?: { name: string };
  /** Datacenters the rendered policy is valid in; absent means all. */
  Datacenters?: string[];
}

/** Where an object lives. Every key and uniqueness check includes both. */
export interface Scope {
  /** Admin partition (Enterprise); `default` when unused. */
  Partition: string;
  /** Namespace within the partition (Enterprise); `default` when unused. */
  Namespace: string;
}

export interface TokenRecord extends Scope {
  /** Public identifier of the token. */
  AccessorID: string;
  /** The credential; never returned to callers without acl:write. */
  SecretID: string;
  /** Free-form text for humans. */
  Description: string;
  /** Direct policy links. */
  Policies: Link[];
  /** Role links. */
  Roles: Link[];
  /** Service identities, rendered through `builtin/service`. */
  ServiceIdentities: ServiceIdentity[];
  /** Node identities, rendered through `builtin/node`. */
  NodeIdentities: NodeIdentity[];
  /** Templated policies rendered into synthetic policies. */
  TemplatedPolicies: TemplatedPolicyLink[];
  /** True when the token stays in the datacenter that made it. */
  Local: boolean;
  /** Auth method that created the token (login only); empty otherwise. */
  AuthMethod: string;
  /** Namespace of the auth method, when AuthMethod is set. */
  AuthMethodNamespace?: string;
  /** RFC 3339 time after which the token is revoked; absent means never. */
  ExpirationTime?: string;
  /** RFC 3339 time the token was created (set by the server). */
  CreateTime: string;
  /** Base64 SHA-256 over the content fields; equal across datacenters. */
  Hash: string;
  /** Index of the change that created the token in this datacenter. */
  CreateIndex: number;
  /** Index of the change that last modified the token in this datacenter. */
  ModifyIndex: number;
}

export interface PolicyRecord extends Scope {
  /** Identifier (UUID). */
  ID: string;
  /** Name, unique per (partition, namespace), compared case-insensitively. */
  Name: string;
  /** Free-form text for humans. */
  Description: string;
  /** Rules text (HCL or JSON) as given. */
  Rules: string;
  /** Datacenters the policy is valid in; absent means all. */
  Datacenters?: string[];
  /** Base64 SHA-256 over the content fields. */
  Hash: string;
  /** Index of the creating change. */
  CreateIndex: number;
  /** Index of the last modifying change. */
  ModifyIndex: number;
}

export interface RoleRecord extends Scope {
  /** Identifier (UUID). */
  ID: string;
  /** Name, unique per (partition, namespace), compared case-insensitively. */
  Name: string;
  /** Free-form text for humans. */
  Description: string;
  /** Policy links. */
  Policies: Link[];
  /** Service identities. */
  ServiceIdentities: ServiceIdentity[];
  /** Node identities. */
  NodeIdentities: NodeIdentity[];
  /** Templated policies. */
  TemplatedPolicies: TemplatedPolicyLink[];
  /** Base64 SHA-256 over the content fields. */
  Hash: string;
  /** Index of the creating change. */
  CreateIndex: number;
  /** Index of the last modifying change. */
  ModifyIndex: number;
}

/** How an auth method turns an external identity into a token (README, "HTTP API"); a global object. */
export interface AuthMethodRecord extends Scope {
  /** Unique per (partition, namespace). */
  Name: string;
  /** `jwt` or `kubernetes`. */
  Type: string;
  DisplayName: string;
  Description: string;
  /** Lifetime of tokens made by login, as a duration (e.g. `1h0m0s`); empty: no expiry. */
  MaxTokenTTL: string;
  /** As sent: `local` or `''` (the same, the default): login tokens stay where they were made; `global`: they replicate. */
  TokenLocality: '' | 'local' | 'global';
  /** Type-specific configuration, as Consul's. */
  Config: Record<string, unknown>;
  CreateIndex: number;
  ModifyIndex: number;
}

/** Which of a method's identities get which links (README, "HTTP API"); a global object. */
export interface BindingRuleRecord extends Scope {
  ID: string;
  Description: string;
  /** Name of the auth method (same partition and namespace); immutable. */
  AuthMethod: string;
  /** bexpr over the verified identity; empty matches every identity. */
  Selector: string;
  BindType: 'service' | 'node' | 'role' | 'policy' | 'templated-policy';
  /** What to bind, with `${value.x}` interpolation. */
  BindName: string;
  /** Variables of a templated policy (`templated-policy` bind type). */
  /** Variables of a templated-policy binding, written as Consul writes them (`name`). */
  BindVars?: { name?: string };
  CreateIndex: number;
  ModifyIndex: number;
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
  Method: string;
  /** The path, its query without `token`. */
  Path: string;
}
