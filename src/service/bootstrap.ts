import { audited } from './audited.js';
import { systemActor } from '../observability/audit.js';
import type { RequestContext } from './context.js';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { BUILTIN_POLICIES, anonymousTokenRecord, builtinPolicyRecord } from '../domain/builtins.js';
import type { Clock } from '../domain/clock.js';
import { conflict, invalid, notPermitted } from '../domain/errors.js';
import { newTokenRecord } from '../domain/token.js';
import {
  ANONYMOUS_TOKEN_ID,
  DEFAULT_NAMESPACE,
  DEFAULT_PARTITION,
  GLOBAL_MANAGEMENT_POLICY_ID,
  RESERVED_PREFIX,
  isReservedID,
  isUUID,
} from '../domain/ids.js';
import type { TokenRecord } from '../domain/types.js';
import type { Store, Tx } from '../store/store.js';
import type { WriteResult } from './context.js';
import type { TokenService } from './tokens.js';
import { freshID, tokenIDTaken } from './uniqueness.js';
import type { TokenView } from './views.js';

/** Bootstrap's response: the token plus `ID` equal to its SecretID (Consul's legacy field). */
export type BootstrapView = TokenView & { ID: string };

/** Where an operator writes the reset index to allow one more bootstrap. */
export const BOOTSTRAP_RESET_FILE = 'acl-bootstrap-reset';

export interface BootstrapOptions {
  dataDir: string;
  /** Whether this datacenter is the primary now, which it is, and its servers (a promotion changes them). */
  isPrimary: () => boolean;
  primaryDatacenter: () => string;
  primaryAddress?: () => string | undefined;
}

function managementToken(tx: Tx, now: number, secret: string, description: string): TokenRecord {
  const accessor = freshID(tokenIDTaken(tx));
  const base = {
    Description: description,
    Policies: [{ ID: GLOBAL_MANAGEMENT_POLICY_ID }],
    Roles: [],
    ServiceIdentities: [],
    NodeIdentities: [],
    TemplatedPolicies: [],
    Local: false,
  };
  return tx.put(
    'tokens',
    newTokenRecord({
      AccessorID: accessor,
      SecretID: secret,
      content: base,
      now,
      scope: { Namespace: DEFAULT_NAMESPACE, Partition: DEFAULT_PARTITION },
    }),
  );
}

export class BootstrapService {
  constructor(
    private readonly store: Store,
    private readonly tokens: TokenService,
    private readonly clock: Clock,
    private readonly options: BootstrapOptions,
  ) {}

  /** Creates the built-in policies and the anonymous token when missing (primary start-up). */
  async ensureBuiltins(): Promise<void> {
    await this.store.transact((tx) => {
      for (const p of BUILTIN_POLICIES) if (!tx.getPolicy(p.ID)) tx.put('policies', builtinPolicyRecord(p));
      if (!tx.getToken(ANONYMOUS_TOKEN_ID)) tx.put('tokens', anonymousTokenRecord(this.clock.now()));
    });
  }

  /**
   * `--initial-management-token`: a management token with that secret, created once
   * (nothing happens when a token already has it), marking ACLs as bootstrapped.
   */
  async ensureInitialManagementToken(secret: string): Promise<void> {
    await this.store.transact(
      (tx) => {
        if (tx.isSecretInUse(secret)) return;
        managementToken(tx, this.clock.now(), secret, 'Initial Management Token');
        tx.putBootstrap({ Bootstrapped: true, ResetIndex: tx.index });
      },
      { audit: { type: 'bootstrap', actor: systemActor('initial_management_token') } },
    );
  }

  private async readResetFile(): Promise<number | undefined> {
    try {
      const text = (await readFile(join(this.options.dataDir, BOOTSTRAP_RESET_FILE), 'utf8')).trim();
      return /^\d+$/.test(text) ? Number(text) : Number.NaN;
    } catch {
      return undefined;
    }
  }

  async bootstrap(ctx: RequestContext, bootstrapSecret: string | undefined): Promise<WriteResult<BootstrapView>> {
    if (!this.options.isPrimary()) {
      const address = this.options.primaryAddress?.();
      const where = address ? ` at ${address}` : '';
      throw notPermitted(`ACL bootstrap is only allowed in the primary datacenter; send it to ${this.options.primaryDatacenter()}${where}`);
    }
    if (bootstrapSecret !== undefined && bootstrapSecret !== '') {
      if (!isUUID(bootstrapSecret)) throw invalid('Invalid BootstrapSecret: not a valid UUID');
      if (isReservedID(bootstrapSecret))
        throw invalid(`Invalid BootstrapSecret: UUIDs with the prefix ${JSON.stringify(RESERVED_PREFIX)} are reserved`);
    }
    if (bootstrapSecret) await this.tokens.checkChosenIDs({ secret: bootstrapSecret }, false);
    const resetFromFile = await this.readResetFile();
    let usedReset = false;
    const token = await this.store.transact(
      (tx) => {
        const state = tx.getBootstrap();
        if (state.Bootstrapped) {
          if (resetFromFile === undefined) {
            throw notPermitted(`ACL bootstrap no longer allowed (reset index: ${state.ResetIndex})`);
          }
          if (resetFromFile !== state.ResetIndex) {
            throw notPermitted(
              `Invalid bootstrap reset index (specified ${Number.isNaN(resetFromFile) ? 'unreadable' : resetFromFile}, reset index: ` +
                `${state.ResetIndex})`,
            );
          }
          usedReset = true;
        }
        let secret = bootstrapSecret || undefined;
        if (secret) {
          if (tokenIDTaken(tx)(secret)) throw conflict('Invalid BootstrapSecret: already in use');
        } else {
          secret = freshID(tokenIDTaken(tx));
        }
        const record = managementToken(tx, this.clock.now(), secret, 'Bootstrap Token (Global Management)');
        tx.putBootstrap({ Bootstrapped: true, ResetIndex: tx.index });
        return record;
      },
      audited(ctx, undefined, resetFromFile === undefined ? 'bootstrap' : 'bootstrap-reset'),
    );
    // The reset file allows one bootstrap: remove it so a restore cannot reuse it.
    if (usedReset) await rm(join(this.options.dataDir, BOOTSTRAP_RESET_FILE), { force: true });
    const view = this.tokens.view(token, true);
    return { value: { ...view, ID: token.SecretID }, index: token.ModifyIndex };
  }
}
