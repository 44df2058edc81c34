/**
 * The query parameters of a trigger and of a test or stream run, as the zod schemas ingress parses
 * them with (src/ingress/trigger.ts) and the OpenAPI document states (src/http/openapi).
 */
import { z } from "zod";

const Flag = z.enum(["true", "false"]);

export const TriggerQuery = z.object({
  clientIdempotencyId: z
    .string()
    .regex(/^[\x20-\x7e]{1,255}$/) // the shared key rule (src/lib/key-constraints.ts DEFAULT_KEY_CONSTRAINTS)
    .optional()
    .describe("your own id for this delivery: it alone decides the identity (1–255 printable ASCII)"),
});

export const TestRunQuery = z.object({
  forceNewExecution: Flag.optional().describe("false: deduplicate like a production trigger; default: a new execution each time"),
});
