/** What a verified bearer token says about its holder (docs/http-api.md, "HTTP API"). */
export interface Identity {
  /** What binding-rule selectors read: `value.x` and `list.x` (jwt), `serviceaccount.x` (kubernetes). */
  selectable: Record<string, unknown>;
  /** What `${…}` in a BindName may name, by dotted path. */
  variables: Record<string, string>;
}

/** The bearer token was refused by the method: a 403 whose reason never repeats the token. */
export class LoginRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LoginRefused';
  }
}
