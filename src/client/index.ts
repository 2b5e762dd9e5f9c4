// watchword/client: the HTTP client and the enforcing client (Authorizer).
export * from './client.js';
export { type DecisionSource, type Reason, reasonText } from '../domain/rules/explain-types.js';
export {
  Authorizer,
  type AuthorizerDownEvent,
  type AuthorizerOptions,
  type AuthorizerStats,
  type AuthorizerUpEvent,
  type CheckPlace,
  type DownPolicy,
} from './authorizer.js';
