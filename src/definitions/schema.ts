/**
 * The workflow definition format (SPEC section 2) as zod schemas: the one place it is defined.
 * The JSON Schema in schema/workflow.schema.json is generated from these; validation of the
 * graph, the expressions and the key lint live beside this file.
 *
 * Every object is strict: an unknown key is an error, never silently dropped.
 */
import { z } from "zod";

/** A string that begins with `=` is a JSONata expression; any other string is a literal. */
export const EXPRESSION_PREFIX = "=";
export function isExpression(value: unknown): value is string {
  return typeof value === "string" && value.startsWith(EXPRESSION_PREFIX);
}

export const VERTEX_ID_PATTERN = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;
export const WORKFLOW_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** `90s`, `30m`, `24h`, `7d`, or a number of milliseconds. */
export const DURATION_PATTERN = /^(\d+)(ms|s|m|h|d)$/;

const Duration = z.union([
  z.number().int().positive().describe("milliseconds"),
  z.string().regex(DURATION_PATTERN, "a duration such as `90s`, `30m`, `24h` or `7d`"),
]);

export function durationMs(value: number | string): number {
  if (typeof value === "number") return value;
  const match = DURATION_PATTERN.exec(value);
  if (!match) throw new Error(`not a duration: ${value}`);
  const n = Number(match[1]);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as "ms" | "s" | "m" | "h" | "d"];
  return n * unit;
}

export const DEFAULT_DEDUPE_WINDOW_MS = 24 * 3_600_000;
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;

const JsonValue = z.json();

const WebhookSignature = z.strictObject({
  secret: z.string().describe("`{{ secrets.NAME }}`: the Worker secret holding the HMAC key"),
  header: z.string().min(1).default("x-idemflow-signature").describe("header carrying the hex HMAC-SHA256"),
  timestampHeader: z.string().min(1).default("x-idemflow-timestamp").describe("header carrying the Unix timestamp in seconds"),
  toleranceSeconds: z.number().int().positive().max(3600).default(300),
});

export const EntryPointConfig = z.strictObject({
  idempotencyFields: z
    .union([z.string().min(1), z.array(z.string().min(1)).min(1)])
    .optional()
    .describe("dot paths into the payload whose values identify a delivery, e.g. `order.id`"),
  schedule: z.string().min(1).optional().describe("a cron string listed in wrangler.toml [triggers] crons"),
  webhook: z.strictObject({ signature: WebhookSignature }).optional(),
  dedupeWindow: Duration.optional().describe("how long identities are remembered; default 24h"),
  maxPayloadBytes: z.number().int().positive().max(10 * 1024 * 1024).optional(),
});

export const RetryPolicy = z.strictObject({
  maxAttempts: z.number().int().min(1).max(100).default(3),
  backoff: z.enum(["fixed", "exponential"]).default("exponential"),
  initialDelayMs: z.number().int().min(0).max(3_600_000).default(1_000),
  maxDelayMs: z.number().int().min(0).max(86_400_000).default(300_000),
});
export const DEFAULT_RETRY = RetryPolicy.parse({});

export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] as const;

export const GatewayConfig = z.strictObject({
  method: z.enum(HTTP_METHODS),
  url: z.string().min(1).describe("a URL, or an expression producing one"),
  headers: z.record(z.string(), z.string()).optional(),
  query: z.record(z.string(), z.string()).optional(),
  body: JsonValue.optional().describe("a JSON value whose `=` strings are expressions, or one expression"),
  timeoutMs: z.number().int().min(1).max(300_000).default(10_000),
  retry: RetryPolicy.optional(),
  clientErrorMode: z.enum(["fail", "complete"]).default("fail"),
  conflictAsProcessed: z
    .boolean()
    .default(false)
    .describe("treat a 409 Conflict as 'already processed' (destinations with natural unique keys)"),
  maxResponseBytes: z.number().int().min(1).max(1024 * 1024).default(64 * 1024),
});

export const TransformConfig = z.strictObject({
  output: JsonValue,
});

const VertexId = z.string().regex(VERTEX_ID_PATTERN, "a letter, then letters, digits, `_` or `-` (at most 64)");

export const EntryPointVertex = z.strictObject({ id: VertexId, type: z.literal("ENTRY_POINT"), config: EntryPointConfig.default({}) });
export const GatewayVertex = z.strictObject({ id: VertexId, type: z.literal("GATEWAY"), config: GatewayConfig });
export const TransformVertex = z.strictObject({ id: VertexId, type: z.literal("TRANSFORM"), config: TransformConfig });

export const Vertex = z.discriminatedUnion("type", [EntryPointVertex, GatewayVertex, TransformVertex]);

export const Edge = z.strictObject({
  from: VertexId,
  to: VertexId,
  when: z.string().startsWith(EXPRESSION_PREFIX, "an expression starting with `=`").optional(),
});

export const WorkflowDefinition = z.strictObject({
  $schema: z.string().optional(),
  id: z.string().regex(WORKFLOW_ID_PATTERN, "letters, digits, `_` or `-` (at most 64)"),
  description: z.string().optional(),
  vertices: z.array(Vertex).min(1),
  edges: z.array(Edge).default([]),
});

export type WorkflowDefinition = z.output<typeof WorkflowDefinition>;
export type WorkflowDefinitionInput = z.input<typeof WorkflowDefinition>;
export type Vertex = z.output<typeof Vertex>;
export type EntryPointVertex = z.output<typeof EntryPointVertex>;
export type GatewayVertex = z.output<typeof GatewayVertex>;
export type TransformVertex = z.output<typeof TransformVertex>;
export type Edge = z.output<typeof Edge>;
export type RetryPolicy = z.output<typeof RetryPolicy>;
export type GatewayConfig = z.output<typeof GatewayConfig>;
export type EntryPointConfig = z.output<typeof EntryPointConfig>;

export function entryPointOf(definition: WorkflowDefinition): EntryPointVertex {
  const entry = definition.vertices.find((v): v is EntryPointVertex => v.type === "ENTRY_POINT");
  if (!entry) throw new Error(`workflow ${definition.id} has no ENTRY_POINT (it should not have passed validation)`);
  return entry;
}
