import type { Logger } from 'pino';
import type { Config } from './config/schema.js';
import type { Placement } from './replication/placement.js';

/**
 * What a start says after "watchword agent started", so that no state a newcomer meets is silent:
 * how it was configured (the agent's process knows where settings came from), a stored placement
 * that outranks `primary_datacenter`, and ACLs not yet bootstrapped.
 */
export function logStartNotices(
  config: Config,
  deps: { logger: Logger; placement: Placement; bootstrapped: boolean; url: string; notices: readonly string[] },
): void {
  const { logger, placement } = deps;
  for (const notice of deps.notices) logger.info(notice);
  placementNotice(config, placement, logger);
  if (placement.isPrimary() && !deps.bootstrapped) {
    logger.info(
      `ACLs are not bootstrapped: \`watchword acl bootstrap\` (or \`curl -X PUT ${deps.url}/v1/acl/bootstrap\`) ` +
        'makes the first management token, once',
    );
  }
}

/**
 * A placement kept in the store (a promotion, a transfer, a newer primary followed) outranks
 * `primary_datacenter`: said at every start, with how to move the role, so a restart with the old
 * configuration is never silently a secondary of another datacenter.
 */
function placementNotice(config: Config, placement: Placement, logger: Logger): void {
  const moved = placement.stored();
  if (!moved || moved.Primary === config.primary_datacenter) return;
  const how = moved.Took ? `, since ${moved.Primary} took over from ${moved.Took.From}` : '';
  const role =
    moved.Primary === config.datacenter
      ? `this datacenter (${config.datacenter}) is the primary`
      : `this datacenter follows ${moved.Primary} as its primary (at ${moved.Addresses.join(', ') || 'addresses it learns'})`;
  logger.warn(
    { primary: moved.Primary, epoch: moved.Epoch, configured: config.primary_datacenter },
    `the store's placement outranks primary_datacenter ${config.primary_datacenter}: ${role}, epoch ${moved.Epoch}${how}. ` +
      `To make ${config.primary_datacenter} the primary again, once it has caught up, run \`watchword operator primary transfer ` +
      `-to ${config.primary_datacenter}\` at the primary (docs/datacenters.md, "Losing the primary datacenter")`,
  );
}
