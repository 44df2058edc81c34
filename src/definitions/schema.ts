/**
 * The workflow definition format (SPEC section 2) as zod schemas: the one place it is defined.
 * The JSON Schema in schema/workflow.schema.json is generated from these (src/definitions/json-schema.ts),
 * so the `.describe()` texts below are what editors show as completion help.
 *
 * Every object is strict: an unknown key is an error, never silently dropped. The rules that a
 * schema cannot state (the graph, expressions, secrets, the key lint) live beside this file and
 * are run by `validateDefinition` (validate.ts).
 */
import { z } from "zod";
import { KEY_ALPHABET_IDS, KEY_PROFILE_IDS } from "./key-profiles";
import { WHOLE_SECRET_TEMPLATE_SOURCE } from "./secret-template";
import { EXPRESSION_PREFIX } from "../expressions/prefix";

// A string that begins with `=` is a JSONata expression (the rule is the expressions': src/expressions/prefix.ts).
export { EXPRESSION_PREFIX, isExpression } from "../expressions/prefix";

export const VERTEX_ID_PATTERN = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;
export const WORKFLOW_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** `90s`, `30m`, `24h`, `7d`, or a number of milliseconds. */
export const DURATION_PATTERN = /^(\d+)(ms|s|m|h|d)$/;
/** An HTTP header name (RFC 9110 `token`). */
export const HEADER_NAME_PATTERN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A dot path into the payload (`order.id`, `items.0.sku`): non-empty segments, no expression. */
export const FIELD_PATH_PATTERN = /^(?!=)[^.\s]+(\.[^.\s]+)*$/;

const Duration = z.union([
  z.number().int().positive().describe("milliseconds"),
  // Greater than zero: a zero window would expire every identity as it is written.
  z.string().regex(/^0*[1-9]\d*(ms|s|m|h|d)$/, "a duration greater than zero, such as `90s`, `30m`, `24h` or `7d`"),
]);

export function durationMs(value: number | string): number {
  if (typeof value === "number") return value;
  const match = DURATION_PATTERN.exec(value);
  if (!match) throw new Error(`not a duration: ${value}`);
  const n = Number(match[1]);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as "ms" | "s" | "m" | "h" | "d"];
  return n * unit;
}

/**
 * The longest duration a definition may set, in ms: 365 days, for every duration in it — the
 * dedupe window and a key's retention here, and any duration added later (the retry policy's
 * delays and budgets already stop far below it). A year outlasts any retention a destination
 * documents and any sender's retries, and keeps every time computed from a duration (now +
 * window, first send + retention) a date the trace can show. Enforced by validation
 * (`checkDurations`, src/definitions/vertex-rules.ts), not by the schema, so a version saved
 * before still parses and runs; the engine renders any time through src/lib/iso-time.ts.
 */
export const MAX_DURATION_MS = 365 * 86_400_000;

/**
 * The shortest retention of a finished execution a definition's `history` may set, in ms: one
 * minute (SPEC section 12), the history sweep's own period. Enforced by validation
 * (src/definitions/history-rules.ts) like `MAX_DURATION_MS`; src/history/retention.ts applies
 * the same bounds to the deployment's HISTORY_* vars.
 */
export const MIN_HISTORY_MS = 60_000;

export const DEFAULT_DEDUPE_WINDOW_MS = 24 * 3_600_000;
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;
/**
 * The largest `maxPayloadBytes` a definition may set (SPEC section 11). The payload is stored in
 * one D1 row (the execution's, which is also the entry step: migrations/0045) and a step that reads it loads it
 * beside other steps' outputs in one row; D1 refuses rows over 2,000,000 bytes. Enforced by the
 * validation (src/definitions/vertex-rules.ts) rather than the schema, so versions saved under
 * the older, looser limit still parse; ingress clamps their limit to this.
 */
export const MAX_PAYLOAD_BYTES_LIMIT = 1024 * 1024;
/** The largest `maxResponseBytes`: the response is stored in the step's row (see MAX_OUTPUT_BYTES). */
export const MAX_RESPONSE_BYTES_LIMIT = 1024 * 1024;

/** Any JSON value. Strings in it that begin with `=` are expressions where the field says so. */
const JsonValue = z.json().meta({ id: "JsonValue", description: "any JSON value; strings beginning with `=` are JSONata expressions" });

const WebhookSignature = z.strictObject({
  secret: z
    .string()
    .describe("exactly `{{ secrets.NAME }}`: the workspace's secret (or a Worker secret granted to it) holding the HMAC-SHA256 key")
    // Stated in the OpenAPI document only; src/definitions/secrets.ts checks it with its own error codes.
    .meta({ pattern: WHOLE_SECRET_TEMPLATE_SOURCE }),
  header: z
    .string()
    .regex(HEADER_NAME_PATTERN)
    .default("x-idemflow-signature")
    .describe("header carrying `v1=` and the hex HMAC-SHA256 of `v1:<timestamp>:<workspaceId>:<workflowId>:<raw body>`"),
  timestampHeader: z
    .string()
    .regex(HEADER_NAME_PATTERN)
    .default("x-idemflow-timestamp")
    .describe("header carrying the Unix timestamp in seconds that was signed with the target and body"),
  toleranceSeconds: z.number().int().positive().max(3600).default(300).describe("how old a signed timestamp may be"),
});

const FieldPath = z.string().regex(FIELD_PATH_PATTERN, "a dot path into the payload such as `order.id`");

export const EntryPointConfig = z.strictObject({
  idempotencyFields: z
    .union([FieldPath, z.array(FieldPath).min(1)])
    .optional()
    .describe("dot paths into the payload whose values identify a delivery, e.g. `order.id`; a payload missing one is rejected with 422"),
  schedule: z.string().min(1).optional().describe("a cron string that must also be listed in wrangler.toml [triggers] crons"),
  webhook: z
    .strictObject({ signature: WebhookSignature })
    .optional()
    .describe("settings of the public webhook POST /hooks/{workspace}/{workflowId}"),
  dedupeWindow: Duration.optional().describe("how long trigger identities are remembered; default 24h, at most 365d"),
  reusePolicy: z
    .enum(["never", "after-failure"])
    .optional()
    .describe(
      "what a trigger whose identity names a FAILED execution does: `never` (default: a duplicate until the window ends) or " +
        "`after-failure` (it starts a new execution, linked to the failed one by previousExecutionId)",
    ),
  maxPayloadBytes: z
    .number()
    .int()
    .positive()
    .optional()
    .describe("payload size limit in bytes; default and maximum 1 MiB (1048576), what one D1 row can hold beside a step's other inputs"),
});

export const RetryPolicy = z.strictObject({
  maxAttempts: z.number().int().min(1).max(100).default(3).describe("attempts in total, the first included"),
  backoff: z.enum(["fixed", "exponential"]).default("exponential"),
  initialDelayMs: z.number().int().min(0).max(3_600_000).default(1_000),
  maxDelayMs: z
    .number()
    .int()
    .min(0)
    .max(86_400_000)
    .default(300_000)
    .describe("longest backoff, and the longest Retry-After honoured: a destination asking for more fails the step (except 'in progress')"),
  // Optional without a zod default (15 minutes, applied in src/steps/retry-policy.ts): a default
  // here would change the version hash of every stored definition that sets `retry`.
  inProgressBudgetMs: z
    .number()
    .int()
    .min(1_000)
    .max(7 * 86_400_000)
    .optional()
    .describe(
      "how long the step keeps asking while the destination answers that this key's earlier request is still in progress " +
        "(409 with Retry-After, or the in-progress problem); counted from the first such answer; default 900000 (15 minutes)",
    ),
});
export const DEFAULT_RETRY = RetryPolicy.parse({});

/** Default of `retry.inProgressBudgetMs`: how long a step waits on a destination's "in progress". */
export const DEFAULT_IN_PROGRESS_BUDGET_MS = 15 * 60_000;

export function inProgressBudgetMs(policy: RetryPolicy): number {
  return policy.inProgressBudgetMs ?? DEFAULT_IN_PROGRESS_BUDGET_MS;
}

export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] as const;

const HeaderName = z.string().regex(HEADER_NAME_PATTERN, "an HTTP header name (letters, digits and !#$%&'*+.^_`|~-)");

/**
 * A JSON Pointer (RFC 6901) to a field of the request body, such as `/idempotency_key`. Tokens
 * that name a JavaScript object's prototype (`__proto__`, `constructor`, `prototype`) are refused
 * by validation (src/definitions/key-rules.ts), not here, so a version saved before still parses.
 */
export const JSON_POINTER_PATTERN = /^(\/([^~/]|~[01])*)+$/;

export const DestinationKeyDeclaration = z
  .strictObject({
    value: z
      .string()
      .startsWith(EXPRESSION_PREFIX, "an expression starting with `=`")
      .describe("the key: an expression over business data (payload, steps), usually `= $idempotencyKey('prefix', …)`"),
    profile: z
      .enum(KEY_PROFILE_IDS)
      .optional()
      .describe("a destination whose documented key facts apply (docs/definitions.md); any field below overrides"),
    header: z
      .string()
      .regex(HEADER_NAME_PATTERN, "an HTTP header name")
      .optional()
      .describe("the header that carries the key (default: the profile's, else Idempotency-Key)"),
    bodyField: z
      .string()
      .regex(JSON_POINTER_PATTERN, "a JSON Pointer such as `/idempotency_key`")
      .optional()
      .describe("the JSON body field that carries the key, as a JSON Pointer, instead of a header"),
    maxLength: z.number().int().min(1).max(1024).optional().describe("the longest key the destination accepts, in characters"),
    alphabet: z.enum(KEY_ALPHABET_IDS).optional().describe("the characters the destination accepts (default printable-ascii)"),
    retention: Duration.optional().describe(
      "how long the destination remembers a key, at least (at most 365d); idemflow refuses to re-send a key older than this",
    ),
  })
  .describe("the destination key: what it is, where it travels, and what the destination accepts and remembers");

/**
 * A verify probe (docs/definitions.md "Verify before re-attempting"): a GET that asks a destination
 * without keys whether an earlier attempt of this write already landed. Run before every attempt
 * after the first; `condition` true means "already done" and the step completes without writing.
 */
export const VerifyProbe = z
  .strictObject({
    url: z.string().min(1).describe("the GET's http(s) URL on the outbound allowlist, or an expression producing one"),
    query: z.record(z.string().min(1), z.string()).optional().describe("query parameters; values are literals or `=` expressions"),
    headers: z
      .record(HeaderName, z.string())
      .optional()
      .describe("header values are literals or `=` expressions; `{{ secrets.NAME }}` is allowed in literal values only"),
    condition: z
      .string()
      .startsWith(EXPRESSION_PREFIX, "an expression starting with `=`")
      .describe(
        "true means the write already happened: an expression over the probe's answer (`status`, `headers`, `body`) " +
          "and the usual context (`payload`, `steps`), e.g. `= $count(body.items) > 0`",
      ),
  })
  .describe("a GET (no body) run before every re-attempt of this write; when its condition holds, the step completes without writing");

/** A connector's name (src/connectors): what a Gateway step's `connector` names. */
export const CONNECTOR_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** A business field of a connector's key rule: the name a step's `keyFields` supplies it under. */
export const KEY_FIELD_PATTERN = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;
/** A write's operation through a connector: the prefix of the key its rule makes (`charge`). */
export const OPERATION_PATTERN = /^[a-z][a-z0-9_-]{0,31}$/;

/**
 * Where a Gateway step that went through a connector came from (src/connectors/resolve.ts): the
 * saved definition holds the step resolved — URL, headers, key, probe — and this provenance.
 */
export const ConnectorProvenance = z.strictObject({
  name: z.string().regex(CONNECTOR_NAME_PATTERN),
  version: z.string().regex(/^[0-9a-f]{64}$/),
  operation: z.string().regex(OPERATION_PATTERN).optional(),
});

/**
 * A GATEWAY's undo call (SPEC section 18, docs/steps.md "Compensation"): run once, when the
 * execution fails for good after this step COMPLETED, in reverse order of completion. Its
 * expressions read `output` (this step's own output), `payload` and `steps`. It must declare its own
 * key (`idempotencyKey`, or an `Idempotency-Key` header expression), never the step's: refused at save.
 */
export const CompensateConfig = z
  .strictObject({
    method: z.enum(HTTP_METHODS).describe("a write (POST, PUT, PATCH, DELETE): GET and HEAD undo nothing and are refused"),
    url: z
      .string()
      .min(1)
      .optional()
      .describe("an http(s) URL on the outbound allowlist, or an expression producing one; default: the step's own `url`"),
    headers: z
      .record(HeaderName, z.string())
      .optional()
      .describe("header values are literals or `=` expressions; `{{ secrets.NAME }}` is allowed in literal values only"),
    query: z.record(z.string().min(1), z.string()).optional().describe("query parameters; values are literals or `=` expressions"),
    body: JsonValue.optional().describe(
      "a JSON value whose `=` strings are expressions (reading `output`, `payload`, `steps`), or one expression",
    ),
    timeoutMs: z.number().int().min(1).max(300_000).optional().describe("default: the step's"),
    idempotencyKey: DestinationKeyDeclaration.optional().describe(
      "the undo's own destination key, from business data (`= $idempotencyKey('refund', payload.order.id)`); never the step's",
    ),
    retry: RetryPolicy.optional().describe("default: the step's"),
    verify: VerifyProbe.optional().describe(
      'the probe run before every re-attempt of the undo (a keyless undo API: docs/definitions.md "Verify before re-attempting")',
    ),
    operation: z
      .string()
      .regex(OPERATION_PATTERN, "lowercase letters, digits, `_` or `-` (at most 32)")
      .optional()
      .describe("through the step's connector: the undo's operation (`refund`), its key's prefix — never the step's"),
    path: z.string().min(1).optional().describe("through the step's connector: the undo's path under its base URL (`/refunds`)"),
    keyFields: z
      .record(z.string().regex(KEY_FIELD_PATTERN, "a key field's name"), z.string())
      .optional()
      .describe("through the step's connector: the business fields its key rule needs, for the undo's own key"),
    connector: ConnectorProvenance.optional().describe("set by the save: the connector the undo goes through (its limits apply)"),
  })
  .describe('the undo call run when the execution fails for good after this step COMPLETED (docs/steps.md "Compensation")');

export const GatewayConfig = z.strictObject({
  method: z.enum(HTTP_METHODS),
  url: z
    .string()
    .min(1)
    .optional()
    .describe("an http(s) URL on the outbound allowlist, or an expression producing one; with `connector`: none (its base URL and `path`)"),
  connector: z
    .union([z.string().regex(CONNECTOR_NAME_PATTERN, "a connector's name"), ConnectorProvenance])
    .optional()
    .describe(
      "a connector of the workspace (PUT /v1/connectors/{name}): the step takes its base URL, headers, key, probe, retry and " +
        "timeout, and cannot drop or override the key; resolved when the workflow is saved",
    ),
  operation: z
    .string()
    .regex(OPERATION_PATTERN, "lowercase letters, digits, `_` or `-` (at most 32)")
    .optional()
    .describe("with `connector`: the write's operation, the prefix of the key the connector's rule makes (`charge`)"),
  path: z.string().min(1).optional().describe("with `connector`: the path under its base URL (`/charges`), or an expression producing one"),
  keyFields: z
    .record(z.string().regex(KEY_FIELD_PATTERN, "a key field's name"), z.string())
    .optional()
    .describe('with `connector`: the business fields its key rule needs, each a literal or an `=` expression (`"= payload.order.id"`)'),
  headers: z
    .record(HeaderName, z.string())
    .optional()
    .describe(
      "header values are literals or `=` expressions; `{{ secrets.NAME }}` is allowed in literal values only; " +
        "`Idempotency-Key` must be an expression over business data (payload, steps)",
    ),
  query: z.record(z.string().min(1), z.string()).optional().describe("query parameters; values are literals or `=` expressions"),
  body: JsonValue.optional().describe("a JSON value whose `=` strings are expressions, or one expression"),
  timeoutMs: z.number().int().min(1).max(300_000).default(10_000),
  idempotencyKey: DestinationKeyDeclaration.optional(),
  verify: VerifyProbe.optional(),
  retry: RetryPolicy.optional(),
  clientErrorMode: z
    .enum(["fail", "complete"])
    .default("fail")
    .describe(
      "`complete`: a response that is neither 2xx nor retried (a 4xx, a 3xx, a 409 without conflictAsProcessed) becomes the " +
        "step's output so edges can route on it; `fail` fails the step",
    ),
  conflictAsProcessed: z
    .boolean()
    .default(false)
    .describe("treat a 409 Conflict as 'already processed' (destinations with natural unique keys)"),
  maxResponseBytes: z
    .number()
    .int()
    .min(1)
    .max(
      MAX_RESPONSE_BYTES_LIMIT,
      `at most ${MAX_RESPONSE_BYTES_LIMIT} (1 MiB): the response is stored in the step's D1 row, and D1 refuses rows over 2,000,000 bytes`,
    )
    .default(64 * 1024)
    .describe("a larger response fails the step; at most 1 MiB (1048576), what the step's D1 row can hold"),
  compensate: CompensateConfig.optional(),
});

export const TransformConfig = z.strictObject({
  output: JsonValue.describe("the step's output; `=` strings in it are evaluated"),
});

/**
 * A DELAY (SPEC section 14, docs/waits.md): sleep for a duration, or until a time an expression
 * computes from the execution's data; exactly one of the two (src/definitions/vertex-rules.ts),
 * at most 365 days. Nothing runs while it sleeps.
 */
export const DelayConfig = z.strictObject({
  for: Duration.optional().describe("how long to sleep, counted from the step's dispatch: `90s`, `30m`, `24h`, `3d` (at most 365d)"),
  until: z
    .string()
    .startsWith(EXPRESSION_PREFIX, "an expression starting with `=`")
    .optional()
    .describe("an expression giving the time to wake (an ISO-8601 time, or epoch milliseconds); evaluated once, at most 365 days ahead"),
});

/** An event's name: what `POST /v1/events` sends and a WAIT_FOR_EVENT waits for (`payment.confirmed`). */
export const EVENT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;
/** A decision a person may take on a wait from the inspector (`approve`, `reject`). */
export const DECISION_PATTERN = /^[a-z][a-z0-9_-]{0,31}$/;

/**
 * A WAIT_FOR_EVENT (SPEC section 14, docs/waits.md): park until an event with this name whose
 * correlation value equals `match`'s value for this execution arrives (POST /v1/events, or an event
 * source), or until `timeout`. One event resumes one wait unless the wait says `consume: "all"`.
 */
export const WaitForEventConfig = z.strictObject({
  event: z.string().regex(EVENT_NAME_PATTERN, "letters, digits, `.`, `_`, `:` or `-`, starting with a letter or digit (at most 200)"),
  match: z
    .string()
    .startsWith(EXPRESSION_PREFIX, "an expression starting with `=`")
    .describe("an expression giving this execution's correlation value (a string or a number): the event's `match` must equal it"),
  timeout: Duration.describe("how long to wait, counted from when the wait starts: `30m`, `3d` (at most 365d)"),
  onTimeout: z
    .enum(["fail", "continue"])
    .default("fail")
    .describe("on timeout: fail the step, or complete it with a null output (an edge's `when` can route on it)"),
  consume: z
    .enum(["one", "all"])
    .default("one")
    .describe("`one`: an event resumes one wait (the oldest); `all`: this wait also resumes on a broadcast that resumed others"),
  decisions: z
    .array(z.string().regex(DECISION_PATTERN, "lowercase letters, digits, `_` or `-` (at most 32)"))
    .min(1)
    .max(5)
    .optional()
    .describe("decisions a person may take from the inspector (`approve`, `reject`): each sends the event with `{ decision }` as data"),
});

/** The name a MAP's item goes by in its expressions (`line`): a letter, then letters, digits or `_`. */
export const MAP_ITEM_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;
/**
 * Names a MAP's item may not take: the expression context's own roots (`payload`, `steps`,
 * `index`, `execution`) and what a step's own expressions see beside them (`attempt`; a verify
 * probe's and `collect`'s `status`, `headers`, `body`, `idempotencyKey`). Refused by validation
 * (src/definitions/vertex-types/map.ts, `map-item-name-reserved`), not the schema, to say why.
 */
export const MAP_RESERVED_NAMES: ReadonlySet<string> = new Set([
  "payload",
  "steps",
  "index",
  "execution",
  "attempt",
  "status",
  "headers",
  "body",
  "idempotencyKey",
]);
export const MAP_DEFAULTS = { as: "item", concurrency: 10, maxItems: 100, maxCollectBytes: 1024 } as const;
export const MAP_MAX_CONCURRENCY = 50;
export const MAP_MAX_ITEMS = 1000;
export const MAP_MAX_COLLECT_BYTES = 16 * 1024;
/**
 * The most a MAP's output may hold, in bytes: `maxCollectBytes` × `maxItems` past it is refused at
 * save (`map-output-too-large`). The output is one step row in D1, which refuses rows over
 * 2,000,000 bytes; 1.5 MB leaves room for the list's JSON punctuation and the `failed` entries.
 */
export const MAP_MAX_OUTPUT_BYTES = 1_500_000;

/**
 * A MAP's work per item (SPEC section 16): one GATEWAY config (inline, or a call through a
 * connector) or one TRANSFORM, written as a vertex without an id. A MAP here (nested) is refused
 * by validation for now (`map-nested`).
 */
export const MapStep = z
  .discriminatedUnion("type", [
    z.strictObject({ type: z.literal("GATEWAY"), config: GatewayConfig }).describe("one HTTP call per item"),
    z.strictObject({ type: z.literal("TRANSFORM"), config: TransformConfig }).describe("one computed output per item"),
  ])
  .describe('the work done for each item: `{ "type": "GATEWAY", "config": {…} }` or `{ "type": "TRANSFORM", "config": {…} }`');

/** A MAP (SPEC section 16, docs/definitions.md "MAP"): its step once per item of a list, each item claimed like a step. */
export const MapConfig = z.strictObject({
  items: z
    .string()
    .startsWith(EXPRESSION_PREFIX, "an expression starting with `=` that gives the list, e.g. `= payload.order.lines`")
    .describe("an expression giving the list (an array); evaluated once, at the MAP's first claim, and persisted"),
  as: z
    .string()
    .regex(MAP_ITEM_NAME_PATTERN, "a letter, then letters, digits or `_` (at most 64)")
    .default(MAP_DEFAULTS.as)
    .describe("the item's name in `step` and `collect` (default `item`); `index` is its position, from 0"),
  concurrency: z
    .number()
    .int()
    .min(1, "at least 1")
    .max(MAP_MAX_CONCURRENCY, `at most ${MAP_MAX_CONCURRENCY} items run at once`)
    .default(MAP_DEFAULTS.concurrency)
    .describe(`how many items run at once: 1 to ${MAP_MAX_CONCURRENCY} (default ${MAP_DEFAULTS.concurrency})`),
  maxItems: z
    .number()
    .int()
    .min(1, "at least 1")
    .max(MAP_MAX_ITEMS, `at most ${MAP_MAX_ITEMS} items per MAP`)
    .default(MAP_DEFAULTS.maxItems)
    .describe(`the longest list accepted: 1 to ${MAP_MAX_ITEMS} (default ${MAP_DEFAULTS.maxItems}); a longer one fails the step`),
  onItemFailure: z
    .enum(["fail", "continue"])
    .default("fail")
    .describe(
      "`fail`: the first item that fails for good fails the MAP (no new item starts); `continue`: the MAP completes with " +
        "`{ items, failed: [{ index, error }] }`",
    ),
  collect: z
    .string()
    .startsWith(EXPRESSION_PREFIX, "an expression starting with `=`")
    .optional()
    .describe(
      "what the MAP keeps of each item, an expression over the item, `index` and the item step's output; default: a GATEWAY " +
        "item's `status` and `body.id`, a TRANSFORM item's output",
    ),
  maxCollectBytes: z
    .number()
    .int()
    .min(1, "at least 1")
    .max(MAP_MAX_COLLECT_BYTES, `at most ${MAP_MAX_COLLECT_BYTES} (16 KiB)`)
    .default(MAP_DEFAULTS.maxCollectBytes)
    .describe("the most bytes one item's collected value may take (default 1024, at most 16384); over it fails that item"),
  step: MapStep,
});

const VertexId = z.string().regex(VERTEX_ID_PATTERN, "a letter, then letters, digits, `_` or `-` (at most 64)");

export const EntryPointVertex = z
  .strictObject({ id: VertexId, type: z.literal("ENTRY_POINT"), config: EntryPointConfig.default({}) })
  .describe("where a trigger enters the workflow; exactly one per workflow");
export const GatewayVertex = z
  .strictObject({ id: VertexId, type: z.literal("GATEWAY"), config: GatewayConfig })
  .describe("an HTTP call to a third party, with a stable Idempotency-Key");
export const TransformVertex = z
  .strictObject({ id: VertexId, type: z.literal("TRANSFORM"), config: TransformConfig })
  .describe("computes an output from the context; no side effects");

export const DelayVertex = z
  .strictObject({ id: VertexId, type: z.literal("DELAY"), config: DelayConfig })
  .describe("sleeps for a duration or until a computed time, holding nothing; resumes once however often its wake-up arrives");

export const WaitForEventVertex = z
  .strictObject({ id: VertexId, type: z.literal("WAIT_FOR_EVENT"), config: WaitForEventConfig })
  .describe("waits for an event matched on a business value, or a timeout, holding nothing; resumed once by the first match");

export const MapVertex = z
  .strictObject({ id: VertexId, type: z.literal("MAP"), config: MapConfig })
  .describe("runs its step once per item of a list, each item with its own key, claim and attempts; fan-in of their collected values");

export const Vertex = z.discriminatedUnion("type", [
  EntryPointVertex,
  GatewayVertex,
  TransformVertex,
  DelayVertex,
  WaitForEventVertex,
  MapVertex,
]);
export const VERTEX_TYPES = ["ENTRY_POINT", "GATEWAY", "TRANSFORM", "DELAY", "WAIT_FOR_EVENT", "MAP"] as const;

export const Edge = z.strictObject({
  from: VertexId,
  to: VertexId,
  when: z
    .string()
    .startsWith(EXPRESSION_PREFIX, "an expression starting with `=`")
    .optional()
    .describe("a JSONata condition on the context; absent means always taken"),
});

/**
 * How long a finished execution of this workflow is kept, by how it ended (SPEC section 12); each
 * member overrides the deployment's default (the HISTORY_* vars). The bounds (1 minute to 365
 * days, never shorter than the entry point's dedupe window) are validation's
 * (src/definitions/history-rules.ts), like every duration's maximum.
 */
export const HistoryPolicy = z
  .strictObject({
    completed: Duration.optional().describe(
      "how long a COMPLETED execution is kept; default: the deployment's HISTORY_COMPLETED var (7d as shipped)",
    ),
    failed: Duration.optional().describe(
      "how long a FAILED execution is kept; default: the deployment's HISTORY_FAILED var (30d as shipped)",
    ),
    cancelled: Duration.optional().describe(
      "how long a CANCELLED execution is kept; default: the deployment's HISTORY_CANCELLED var (30d as shipped)",
    ),
  })
  .describe(
    "how long finished executions are kept before the history sweep removes them (durations such as `7d`; at least 1m, at most " +
      "365d, and never shorter than the entry point's dedupeWindow); an unset member takes the deployment's default",
  );

export const WorkflowDefinition = z.strictObject({
  $schema: z.string().optional().describe("editor hint only (e.g. ../schema/workflow.schema.json); not stored and not part of the version"),
  id: z.string().regex(WORKFLOW_ID_PATTERN, "letters, digits, `_` or `-` (at most 64)"),
  description: z.string().optional(),
  vertices: z.array(Vertex).min(1),
  edges: z.array(Edge).default([]),
  history: HistoryPolicy.optional(),
});

export type WorkflowDefinition = z.output<typeof WorkflowDefinition>;
export type WorkflowDefinitionInput = z.input<typeof WorkflowDefinition>;
export type Vertex = z.output<typeof Vertex>;
export type EntryPointVertex = z.output<typeof EntryPointVertex>;
export type GatewayVertex = z.output<typeof GatewayVertex>;
export type TransformVertex = z.output<typeof TransformVertex>;
export type DelayVertex = z.output<typeof DelayVertex>;
export type WaitForEventVertex = z.output<typeof WaitForEventVertex>;
export type MapVertex = z.output<typeof MapVertex>;
export type MapConfig = z.output<typeof MapConfig>;
export type MapStep = z.output<typeof MapStep>;
export type Edge = z.output<typeof Edge>;
export type RetryPolicy = z.output<typeof RetryPolicy>;
export type CompensateConfig = z.output<typeof CompensateConfig>;
export type GatewayConfig = z.output<typeof GatewayConfig>;
export type ConnectorProvenance = z.output<typeof ConnectorProvenance>;
export type DestinationKeyDeclaration = z.output<typeof DestinationKeyDeclaration>;
export type VerifyProbe = z.output<typeof VerifyProbe>;
export type EntryPointConfig = z.output<typeof EntryPointConfig>;
export type HistoryPolicy = z.output<typeof HistoryPolicy>;

export function entryPointOf(definition: WorkflowDefinition): EntryPointVertex {
  const entry = definition.vertices.find((v): v is EntryPointVertex => v.type === "ENTRY_POINT");
  if (!entry) throw new Error(`workflow ${definition.id} has no ENTRY_POINT (it should not have passed validation)`);
  return entry;
}
