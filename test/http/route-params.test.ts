import { describe, expectTypeOf, it } from 'vitest';
import type { ParamsOf } from '../../src/http/resource.js';

// Checked by the type checker (npm run typecheck, in CI): a route's handler gets its parameters typed from its path.
describe('ParamsOf', () => {
  it('types the parameters a route path names', () => {
    expectTypeOf<ParamsOf<'/v1/acl/role/:id'>>().toEqualTypeOf<{ id: string }>();
    expectTypeOf<ParamsOf<'/v1/acl/policy/name/*'>>().toEqualTypeOf<{ '*': string }>();
    expectTypeOf<ParamsOf<'/v1/a/:x/b/:y'>>().toEqualTypeOf<{ x: string; y: string }>();
    expectTypeOf<ParamsOf<'/v1/acl/tokens'>>().toEqualTypeOf<Record<never, string>>();
  });
});
