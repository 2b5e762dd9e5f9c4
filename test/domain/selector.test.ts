import { afterAll, describe, expect, it } from 'vitest';
import { Selectors } from '../../src/auth/selectors.js';
import { SelectorError, parseSelector, selectorPaths } from '../../src/domain/selector.js';

// Binding-rule selectors against Consul's documented bexpr semantics: `==`/`!=` on
// text, `in`/`contains` on lists (membership), strings (substring) and maps (keys),
// `matches` as a regular expression search, `is empty`, `and`/`or`/`not`, parentheses.

const jwt = {
  value: { name: 'web', team: 'platform', email: 'ops@example.com', empty: '', 'org.unit': 'infra' },
  list: { groups: ['admins', 'dev'], none: [] as string[] },
};
const kubernetes = { serviceaccount: { name: 'api', namespace: 'default', uid: '0b8c-11' } };

const cases: Array<[string, unknown, boolean]> = [
  // equality
  ['value.name == "web"', jwt, true],
  ['value.name == "api"', jwt, false],
  ['value.name != "api"', jwt, true],
  ['value.name != "web"', jwt, false],
  ['value.name == `web`', jwt, true],
  ['value.name == web', jwt, true],
  ['value.name=="web"', jwt, true],
  ['value.empty == ""', jwt, true],
  ['value.Name == "web"', jwt, false],
  ['value.name == "WEB"', jwt, false],
  // membership in lists
  ['"admins" in list.groups', jwt, true],
  ['"ops" in list.groups', jwt, false],
  ['"ops" not in list.groups', jwt, true],
  ['"admins" not in list.groups', jwt, false],
  ['list.groups contains "dev"', jwt, true],
  ['list.groups contains "de"', jwt, false],
  ['list.groups not contains "ops"', jwt, true],
  ['"x" in list.none', jwt, false],
  // substrings and keys
  ['"example.com" in value.email', jwt, true],
  ['value.email contains "@"', jwt, true],
  ['value.email not contains "corp"', jwt, true],
  ['"name" in value', jwt, true],
  ['"missing" in value', jwt, false],
  // regular expressions
  ['value.email matches "^ops@.*\\\\.com$"', jwt, true],
  ['value.email matches "^dev"', jwt, false],
  ['value.email not matches "^dev"', jwt, true],
  ['value.team matches "form"', jwt, true],
  ['value.name matches `^w.b$`', jwt, true],
  // emptiness
  ['value.empty is empty', jwt, true],
  ['value.name is empty', jwt, false],
  ['value.name is not empty', jwt, true],
  ['list.none is empty', jwt, true],
  ['list.groups is not empty', jwt, true],
  // logic
  ['value.name == "web" and "admins" in list.groups', jwt, true],
  ['value.name == "web" and "ops" in list.groups', jwt, false],
  ['value.name == "api" or "admins" in list.groups', jwt, true],
  ['value.name == "api" or "ops" in list.groups', jwt, false],
  ['not value.name == "api"', jwt, true],
  ['not (value.name == "web")', jwt, false],
  ['not not value.name == "web"', jwt, true],
  ['(value.name == "api" or value.team == "platform") and list.groups contains "dev"', jwt, true],
  ['value.name == "api" or value.team == "platform" and list.groups contains "ops"', jwt, false],
  ['value.name == "web" or value.team == "x" and list.groups contains "ops"', jwt, true],
  ['((value.name == "web"))', jwt, true],
  // paths: dotted keys, bracket keys, kubernetes identities
  ['value.org.unit == "infra"', jwt, true],
  ['value["org.unit"] == "infra"', jwt, true],
  ['serviceaccount.name == "api"', kubernetes, true],
  ['serviceaccount.namespace == "default" and serviceaccount.name != "web"', kubernetes, true],
  ['serviceaccount.uid matches "^0b8c"', kubernetes, true],
  // a selector that names nothing does not evaluate: no match, whatever the operator
  ['value.nope == "x"', jwt, false],
  ['value.nope != "x"', jwt, false],
  ['not value.nope == "x"', jwt, false],
  ['value.name == "web" or value.nope == "x"', jwt, true],
  ['list.groups.first == "admins"', jwt, false],
];

describe('binding-rule selectors', () => {
  // As a daemon evaluates them: parsed once, `matches` clauses on the selector thread.
  const selectors = new Selectors();
  afterAll(() => selectors.close());
  const matches = async (selector: string, data: unknown) => (await selectors.match([selector], data))[0];

  it('has at least 40 cases', () => expect(cases.length).toBeGreaterThanOrEqual(40));

  it.each(cases)('%s', async (selector, data, expected) => {
    expect(await matches(selector, data)).toBe(expected);
  });

  it('matches every identity with an empty selector', async () => {
    expect(await matches('', jwt)).toBe(true);
    expect(await matches('   ', kubernetes)).toBe(true);
  });

  it('refuses an invalid regular expression when a rule is written, naming the clause', async () => {
    await expect(selectors.check('value.name == "x" or value.name matches "("')).rejects.toThrow(
      /clause 2 \(value\.name matches "\("\): invalid regular expression/,
    );
  });

  it.each([
    ['value.name = "web"', 'unexpected "="; did you mean "=="? (at column 12)'],
    ['value.name == "web" and', 'expected a selector such as value.name, found the end of the selector (at column 24)'],
    ['value.name "web"', 'expected a matching operator ("==", "!=", "is empty", "contains", "matches", "in"), found "web" (at column 12)'],
    ['(value.name == "web"', 'expected ")", found the end of the selector (at column 21)'],
    ['value.name == "web', 'unterminated string (at column 15)'],
    ['value.name is full', 'expected "empty", found "full" (at column 15)'],
    ['value. == "x"', 'expected a field name after ".", found "==" (at column 8)'],
    ['value.name == "a" value.team == "b"', 'expected "and", "or" or the end of the selector, found "value" (at column 19)'],
    ['value.name == "a" && value.team == "b"', 'unexpected character "&" (at column 19)'],
    ['"x" in', 'expected a selector such as value.name, found the end of the selector (at column 7)'],
  ])('refuses %s with a message naming the problem', (selector, message) => {
    expect(() => parseSelector(selector)).toThrow(SelectorError);
    expect(() => parseSelector(selector)).toThrow(message);
  });

  it('lists the paths a selector reads (checked against the method when a rule is written)', () => {
    expect(selectorPaths(parseSelector('value.name == "a" and ("x" in list.groups or not value["org.unit"] is empty)'))).toEqual([
      'value.name',
      'list.groups',
      'value.org.unit',
    ]);
  });
});
