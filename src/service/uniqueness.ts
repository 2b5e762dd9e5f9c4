import { conflict } from '../domain/errors.js';
import { generateID } from '../domain/ids.js';
import type { Scope } from '../domain/types.js';
import type { Reader } from '../store/reader.js';

/** A generated ID that `isTaken` says is free (collisions are astronomically rare, but checked). */
export async function freshID(isTaken: (id: string) => Promise<boolean>): Promise<string> {
  for (;;) {
    const id = generateID();
    if (!(await isTaken(id))) return id;
  }
}

/** Whether a value is any token's AccessorID or SecretID: new token IDs must be neither. */
export const tokenIDTaken =
  (reader: Reader) =>
  async (id: string): Promise<boolean> =>
    (await reader.getToken(id)) !== undefined || (await reader.isSecretInUse(id));

/** Names are unique per scope, compared case-insensitively; renaming to one's own name is fine. */
export async function checkNameFree(reader: Reader, kind: 'policy' | 'role', scope: Scope, name: string, selfID: string | undefined): Promise<void> {
  const other = kind === 'policy' ? await reader.getPolicyByName(scope, name) : await reader.getRoleByName(scope, name);
  if (other && other.ID !== selfID) {
    const Kind = kind === 'policy' ? 'Policy' : 'Role';
    throw conflict(`Invalid ${Kind}: A ${Kind} with Name ${JSON.stringify(name)} already exists`);
  }
}
