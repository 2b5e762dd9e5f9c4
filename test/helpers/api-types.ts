import type { ApiAnswer } from '../../src/api/answers.js';
import type { ErrorResponse } from '../../src/api/schemas.js';

/**
 * What a test's HTTP call answers, typed from its method and path by the table the client
 * reads too (src/api/answers.ts): `api('GET', `/v1/acl/token/${id}`)` gives a token. Refusals
 * share the route's answer type with the error body's fields (`code`, `message`), as a test
 * reads either after checking the status. A path the table does not know answers `unknown`:
 * the test names the type, `api<MyShape>(…)`.
 */
export type AnswerOf<M extends string, P extends string> = ApiAnswer<M, P> & Partial<ErrorResponse>;
