/**
 * A connector (SPEC section 15, docs/connectors.md): a workspace's reusable destination whose key a
 * step cannot forget. It states the base URL, the headers every call carries (literals and secret
 * templates, never a secret's value), **the key rule** — where the key travels, what the
 * destination accepts and remembers (a key profile, or the fields of one), and how it is derived:
 * from an operation's prefix and business fields the step must supply, or one expression — the
 * retry and timeout defaults, the verify probe of a keyless API, and which methods are writes.
 */
import { z } from "zod";
import {
  CONNECTOR_NAME_PATTERN,
  DestinationKeyDeclaration,
  EXPRESSION_PREFIX,
  HEADER_NAME_PATTERN,
  HTTP_METHODS,
  KEY_FIELD_PATTERN,
  OPERATION_PATTERN,
  RetryPolicy,
} from "../definitions/schema";
import { ConnectorLimits } from "../flow/limits";

export { CONNECTOR_NAME_PATTERN, KEY_FIELD_PATTERN };

const Expression = z.string().startsWith(EXPRESSION_PREFIX, "an expression starting with `=`");
const KeyField = z.string().regex(KEY_FIELD_PATTERN, "a letter, then letters, digits or `_` (at most 64)");

/** How the key is derived. */
export const KeyRule = z.union([
  z
    .strictObject({
      fields: z.array(KeyField).min(1).max(8).describe("the business fields every write supplies in its `keyFields`, in key order"),
      format: z
        .enum(["hashed", "plain"])
        .default("hashed")
        .describe(
          "`hashed`: `$idempotencyKey(operation, …fields)` (a fixed-length key the destination's limits fit); " +
            "`plain`: `operation-field1-field2` (readable; the destination's limits are checked at send)",
        ),
    })
    .describe("the key from the step's operation and business fields"),
  z.strictObject({ expression: Expression.describe("the key as one expression over the execution (payload, steps)") }),
]);

/** The key's rule and where it travels: a destination key declaration without its `value`, plus the rule that makes it. */
export const ConnectorKey = DestinationKeyDeclaration.omit({ value: true }).extend({ rule: KeyRule });

/** A keyless API's probe, relative to the base URL: run before every re-attempt of a write through the connector. */
export const ConnectorVerify = z.strictObject({
  path: z.string().min(1).describe("a path under the base URL (`/orders`), or an expression producing one"),
  query: z.record(z.string().min(1), z.string()).optional().describe("query parameters; values are literals or `=` expressions"),
  condition: Expression.describe('true means the write already happened (docs/definitions.md "Verify before re-attempting")'),
});

/**
 * The destination's undo operation (docs/steps.md "Compensation"): what a step's `compensate` through
 * this connector calls when it gives no `path` of its own — its operation (the key's prefix, never a
 * write's), method, path, and optionally its own key rule (default: `key.rule`, with this operation).
 */
export const ConnectorCompensate = z.strictObject({
  operation: z
    .string()
    .regex(OPERATION_PATTERN, "lowercase letters, digits, `_` or `-` (at most 32)")
    .describe("the undo's operation, the prefix of its key (`refund`): its key can never be a write's"),
  method: z.enum(HTTP_METHODS).default("POST"),
  path: z.string().min(1).describe("the undo's path under the base URL (`/refunds`), or an expression producing one"),
  rule: KeyRule.optional().describe("the undo's own key rule; default: `key.rule`"),
});

export const ConnectorDefinition = z.strictObject({
  $schema: z.string().optional().describe("an editor hint; not stored"),
  name: z.string().regex(CONNECTOR_NAME_PATTERN, "a letter or digit, then letters, digits, `_` or `-` (at most 64)"),
  description: z.string().max(2000).optional(),
  baseUrl: z
    .string()
    .min(1)
    .describe("the absolute http(s) URL every path is under, e.g. `https://api.stripe.com/v1`; on OUTBOUND_ALLOWLIST"),
  headers: z
    .record(z.string().regex(HEADER_NAME_PATTERN, "an HTTP header name"), z.string())
    .optional()
    .describe("headers every call carries: literals and `{{ secrets.NAME }}` templates, never a secret's value"),
  key: ConnectorKey.optional().describe("the key every write carries; a step cannot drop or override it"),
  verify: ConnectorVerify.optional(),
  writes: z
    .array(z.enum(HTTP_METHODS))
    .default(["POST", "PUT", "PATCH", "DELETE"])
    .describe("the methods that change something at the destination: each carries the key (or runs the probe)"),
  retry: RetryPolicy.optional().describe("the retry policy of a step that sets none"),
  timeoutMs: z.number().int().min(1).max(300_000).optional().describe("the timeout of a step that sets none"),
  limits: ConnectorLimits.optional(),
  compensate: ConnectorCompensate.optional().describe("the undo a step's `compensate` through this connector calls by default"),
});

export type ConnectorDefinition = z.output<typeof ConnectorDefinition>;
export type ConnectorKey = z.output<typeof ConnectorKey>;

/** A saved connector: its latest version, as a workflow's save resolves it. */
export interface StoredConnector {
  workspace: string;
  name: string;
  version: string;
  definition: ConnectorDefinition;
  createdAt: number;
}
