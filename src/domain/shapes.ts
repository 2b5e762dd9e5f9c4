import { z } from 'zod';
import type { NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from './types.js';

/**
 * zod shapes of what tokens and roles grant, as stored and as returned: one definition
 * for the store's record schemas and the API's response schemas.
 */
export const serviceIdentityShape: z.ZodType<ServiceIdentity> = z.object({
  ServiceName: z.string(),
  Datacenters: z.array(z.string()).optional(),
});

export const nodeIdentityShape: z.ZodType<NodeIdentity> = z.object({ NodeName: z.string(), Datacenter: z.string() });

export const templatedPolicyShape: z.ZodType<TemplatedPolicyLink> = z.object({
  TemplateName: z.string(),
  TemplateVariables: z.object({ Name: z.string() }).optional(),
  Datacenters: z.array(z.string()).optional(),
});

/** Where an object lives. */
export const scopeShape = { Namespace: z.string(), Partition: z.string() };
