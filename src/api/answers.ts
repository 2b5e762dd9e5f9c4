import type { z } from 'zod';
import type {
  AgentSelfResponse,
  AuthMethodResponse,
  BindingRuleResponse,
  BootstrapResponse,
  DryRunResponse,
  ExpandedTokenResponse,
  PolicyResponse,
  QuotaResponse,
  RoleResponse,
  SnapshotRestoreResponse,
  SyntheticPolicyResponse,
  TemplatedPolicyResponse,
  TokenAuthorizerResponse,
  TokenResponse,
  WhoCanResponse,
  authorizeResponse,
} from './schemas.js';
import type {
  AgentHealthResponse,
  AuditPageResponse,
  InventoryResponse,
  OperatorPrimaryResponse,
  OperatorServersResponse,
  OperatorUpgradeResponse,
  PromotionResponse,
  ReplicationStatusResponse,
  TransferLeaderResponse,
} from './status-schemas.js';

/**
 * What a call answers, by its method and path: the one table both ends read. The client's
 * calls take their answer types from it, and so do the tests' HTTP calls
 * (`api('GET', `/v1/acl/token/${id}`)` gives a token). Paths are matched by prefix, the longer
 * first; a query written into the path picks a different answer (`?dry-run=true`). A path it
 * does not know answers `unknown`.
 */
export type ApiAnswer<M extends string, P extends string> = M extends 'DELETE' ? DeleteAnswer<P> : Answer<M, P>;

type DeleteAnswer<P extends string> = P extends `/v1/acl/${string}` ? boolean : unknown;

/** The OpenAPI document: free-form JSON walked by key (its own validator checks the shape). */
// biome-ignore lint/suspicious/noExplicitAny: a document read by key, checked by its own validator
export type OpenAPIDocument = Record<string, any>;

/** `/v1/internal/index`: this datacenter's newest index and its change log's identity. */
export interface IndexResponse {
  Index: number;
  LogID: string;
}

type Answer<M extends string, P extends string> = P extends `${string}?dry-run${string}`
  ? DryRunResponse
  : P extends `/v1/acl/token${string}`
    ? TokenAnswer<M, P>
    : P extends `/v1/acl/${string}`
      ? AclAnswer<P>
      : OtherAnswer<M, P>;

type TokenAnswer<M extends string, P extends string> = P extends `/v1/acl/tokens${string}`
  ? TokenResponse[]
  : P extends `/v1/acl/token/self${string}`
    ? TokenResponse
    : P extends `/v1/acl/token/${string}/${string}`
      ? TokenResponse
      : P extends `/v1/acl/token/${string}`
        ? M extends 'GET'
          ? ExpandedTokenResponse
          : TokenResponse
        : TokenResponse;

type AclAnswer<P extends string> = P extends `/v1/acl/bootstrap${string}`
  ? BootstrapResponse
  : P extends `/v1/acl/login${string}`
    ? TokenResponse
    : P extends `/v1/acl/logout${string}`
      ? boolean
      : P extends `/v1/acl/policies${string}`
        ? PolicyResponse[]
        : P extends `/v1/acl/policy${string}`
          ? PolicyResponse
          : P extends `/v1/acl/roles${string}`
            ? RoleResponse[]
            : P extends `/v1/acl/role${string}`
              ? RoleResponse
              : P extends `/v1/acl/auth-methods${string}`
                ? AuthMethodResponse[]
                : P extends `/v1/acl/auth-method${string}`
                  ? AuthMethodResponse
                  : P extends `/v1/acl/binding-rules${string}`
                    ? BindingRuleResponse[]
                    : P extends `/v1/acl/binding-rule${string}`
                      ? BindingRuleResponse
                      : P extends `/v1/acl/templated-policies${string}`
                        ? Record<string, TemplatedPolicyResponse>
                        : P extends `/v1/acl/templated-policy/preview/${string}`
                          ? SyntheticPolicyResponse
                          : P extends `/v1/acl/templated-policy/${string}`
                            ? TemplatedPolicyResponse
                            : P extends `/v1/acl/inventory${string}`
                              ? InventoryResponse
                              : P extends `/v1/acl/quotas${string}`
                                ? QuotaResponse[]
                                : P extends `/v1/acl/quota${string}`
                                  ? QuotaResponse
                                  : P extends `/v1/acl/replication${string}`
                                    ? ReplicationStatusResponse
                                    : P extends `/v1/acl/who-can${string}`
                                      ? WhoCanResponse
                                      : unknown;

type OtherAnswer<M extends string, P extends string> = P extends `/v1/agent/self${string}`
  ? AgentSelfResponse
  : P extends `/v1/agent/health${string}`
    ? AgentHealthResponse
    : P extends `/v1/operator/servers${string}`
      ? OperatorServersResponse
      : P extends `/v1/operator/primary${string}`
        ? M extends 'PUT'
          ? PromotionResponse
          : OperatorPrimaryResponse
        : P extends `/v1/operator/upgrade${string}`
          ? OperatorUpgradeResponse
          : P extends `/v1/operator/raft/transfer-leader${string}`
            ? TransferLeaderResponse
            : P extends `/v1/operator/audit${string}`
              ? AuditPageResponse
              : P extends `/v1/internal/acl/authorizer${string}`
                ? TokenAuthorizerResponse
                : P extends `/v1/internal/acl/authorize${string}`
                  ? z.infer<typeof authorizeResponse>
                  : P extends `/v1/internal/index${string}`
                    ? IndexResponse
                    : P extends `/v1/snapshot${string}`
                      ? M extends 'PUT'
                        ? SnapshotRestoreResponse
                        : unknown
                      : P extends `/v1/openapi.json${string}`
                        ? OpenAPIDocument
                        : P extends `/v1/status/leader${string}`
                          ? string
                          : P extends `/v1/${'catalog/datacenters' | 'status/peers'}${string}`
                            ? string[]
                            : unknown;
