import { z } from 'zod';
import type { NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from './types.js';

/**
 * zod shapes of what tokens and roles grant, as answers show them (the stored records' strict
 * schemas are derived in domain/records.ts).
 */
export const serviceIdentityShape: z.ZodType<ServiceIdentity> = z.object({
  ServiceName: z.string(),
  Datacenters: z.array(z.string()).optional(),
});

export const nodeIdentityShape: z.ZodType<NodeIdentity> = z.object({ NodeName: z.string(), Datacenter: z.string() });

const olderName = (v: unknown): unknown =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && !('name' in v) && 'Name' in v ? { name: (v as { Name: unknown }).Name } : v;

/** A template's variables as stored and returned (`name`); a record of the older shape (`Name`) reads the same. */
const templateVariablesShape = z.preprocess(olderName, z.object({ name: z.string() }));

export const templatedPolicyShape = z.object({
  TemplateName: z.string(),
  TemplateVariables: templateVariablesShape.optional(),
  Datacenters: z.array(z.string()).optional(),
}) as unknown as z.ZodType<TemplatedPolicyLink>;
