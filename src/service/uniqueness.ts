import { conflict } from '../domain/errors.js';
import { generateID } from '../domain/ids.js';
import type { Scope } from '../domain/types.js';
import type { TxReader } from '../store/store.js';

/** A generated ID that `isTaken` says is free (collisions are astronomically rare, but checked). */
export function freshID(isTaken: (id: string) => boolean): string {
  for (;;) {
    const id = generateID();
    if (!isTaken(id)) return id;
  }
}

/** Whether a value is any token's AccessorID or SecretID: new token IDs must be neither. */
export const tokenIDTaken =
  (reader: TxReader) =>
  (id: string): boolean =>
    reader.getToken(id) !== undefined || reader.isSecretInUse(id);

/** Names are unique per scope, compared case-insensitively; renaming to one's own name is fine. */
export function checkNameFree(
  reader: Pick<TxReader, 'getPolicyByName' | 'getRoleByName'>,
  kind: 'policy' | 'role',
  scope: Scope,
  name: string,
  selfID: string | undefined,
): void {
  const other = kind === 'policy' ? reader.getPolicyByName(scope, name) : reader.getRoleByName(scope, name);
  if (other && other.ID !== selfID) {
    const Kind = kind === 'policy' ? 'Policy' : 'Role';
    throw conflict(`Invalid ${Kind}: A ${Kind} with Name ${JSON.stringify(name)} already exists`);
  }
}
