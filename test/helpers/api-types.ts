import type {
  AgentHealthResponse,
  AgentSelfResponse,
  AuditPageResponse,
  AuthMethodResponse,
  BindingRuleResponse,
  BootstrapResponse,
  ErrorResponse,
  ExpandedTokenResponse,
  OperatorPrimaryResponse,
  OperatorServersResponse,
  PolicyResponse,
  ReplicationStatusResponse,
  RoleResponse,
  SnapshotRestoreResponse,
  SyntheticPolicyResponse,
  TemplatedPolicyResponse,
  TokenAuthorizerResponse,
  TokenResponse,
} from '../../src/api/schemas.js';

/**
 * What a test's HTTP call answers, typed from its method and path (the shapes of
 * src/api/schemas.ts): `api('GET', `/v1/acl/token/${id}`)` gives a token. Refusals share the
 * route's answer type with the error body's fields (`code`, `message`), as a test reads
 * either after checking the status. A path this does not know answers `unknown`: the test
 * names the type, `api<MyShape>(…)`.
 */
export type AnswerOf<M extends string, P extends string> = (M extends 'DELETE' ? DeleteAnswer<P> : ReadOrWriteAnswer<M, P>) &
  Partial<ErrorResponse>;

type DeleteAnswer<P extends string> = P extends `/v1/acl/${string}` ? boolean : unknown;

type ReadOrWriteAnswer<M extends string, P extends string> = P extends `/v1/acl/tokens${string}`
  ? TokenResponse[]
  : P extends `/v1/acl/token/self${string}`
    ? TokenResponse
    : P extends `/v1/acl/token/${string}`
      ? M extends 'GET'
        ? ExpandedTokenResponse
        : TokenResponse
      : P extends `/v1/acl/token${string}`
        ? TokenResponse
        : P extends `/v1/acl/bootstrap${string}`
          ? BootstrapResponse
          : P extends `/v1/acl/login${string}`
            ? TokenResponse
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
                                  : P extends `/v1/acl/replication${string}`
                                    ? ReplicationStatusResponse
                                    : P extends `/v1/agent/self${string}`
                                      ? AgentSelfResponse
                                      : P extends `/v1/operator/servers${string}`
                                        ? OperatorServersResponse
                                        : P extends `/v1/operator/primary${string}`
                                          ? OperatorPrimaryResponse
                                          : P extends `/v1/internal/acl/authorizer${string}`
                                            ? TokenAuthorizerResponse
                                            : P extends `/v1/snapshot${string}`
                                              ? M extends 'PUT'
                                                ? SnapshotRestoreResponse
                                                : unknown
                                              : P extends `/v1/internal/acl/authorize${string}`
                                                ? Array<{ Resource: string; Segment?: string; Access: string; Allow: boolean }>
                                                : P extends `/v1/operator/audit${string}`
                                                  ? AuditPageResponse
                                                  : P extends `/v1/agent/health${string}`
                                                    ? AgentHealthResponse
                                                    : P extends `/v1/openapi.json${string}`
                                                      ? OpenAPIDocument
                                                      : P extends `/v1/status/leader${string}`
                                                        ? string
                                                        : P extends `/v1/${'catalog/datacenters' | 'status/peers'}${string}`
                                                          ? string[]
                                                          : unknown;

/** The OpenAPI document: free-form JSON that its tests walk by key (its own validator checks the shape). */
type OpenAPIDocument = Record<string, any>;
