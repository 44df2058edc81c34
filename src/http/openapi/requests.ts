/**
 * Request shapes of the HTTP API as zod schemas, for the OpenAPI document (input shapes). These
 * routes parse with the very schema the document states: `PUT /v1/workflows/{id}`
 * (WorkflowDefinition), the execution and workflow lists and reads, `GET /v1/stats`, the retry,
 * cancel and secret bodies (src/http/query-params.ts, routes/secrets.ts), and the trigger's and
 * test run's queries (src/ingress/queries.ts, re-exported here).
 */
import { z } from "zod";
import { EVENT_NAME_PATTERN, WORKFLOW_ID_PATTERN, WorkflowDefinition } from "../../definitions/schema";
import { MAX_MATCH_BYTES } from "../../lib/correlation";
import { MAX_EVENT_DATA_BYTES } from "../../events/ingest";
import { MAX_EXACT_NUMBER } from "../../lib/json-numbers";
import { KEY_PATTERN } from "./patterns";
import { TestRunQuery, TriggerQuery } from "../../ingress/queries";
import { MAX_INDEXED_VALUE_BYTES } from "../../ingress/identity-values";
import { EXECUTION_STATUSES } from "./responses";

export { WorkflowDefinition };

const Flag = z.enum(["true", "false"]);
/** An ISO 8601 date-time with a zone, e.g. `2026-12-03T10:00:00Z`. */
const DateTime = z.iso.datetime({ offset: true });

export const ExecutionListQuery = z.object({
  workflowId: z.string().optional().describe("only this workflow's executions"),
  status: z.enum(EXECUTION_STATUSES).optional(),
  limit: z.int().min(1).max(100).default(20),
  cursor: z.string().optional().describe("the `nextCursor` of the previous page, unchanged"),
  since: DateTime.optional().describe("created at or after this time"),
  until: DateTime.optional().describe("created before this time"),
  hadDuplicates: Flag.optional().describe("true: only executions that stopped at least one duplicate"),
  retried: Flag.optional().describe("true: only executions with a step that needed more than one attempt"),
  // The search by business id (SPEC section 15, docs/ingress.md "Search by business id"): one at a time.
  identity: z
    .string()
    .min(1)
    .max(MAX_INDEXED_VALUE_BYTES)
    .optional()
    .describe(
      "search: the executions whose trigger identity was built from this business value (an `idempotencyFields` value or a " +
        '`clientIdempotencyId`), kept or removed; `1001` finds the number and the string, `"1001"` only the string',
    ),
  destinationKey: z
    .string()
    .min(1)
    .max(255)
    .optional()
    .describe("search: the executions whose steps sent this destination key, and its sends on record (they outlive the executions)"),
  keyPrefix: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{1,64}$/)
    .optional()
    .describe(
      "search, with keyValues: the key `$idempotencyKey(keyPrefix, …keyValues)` makes, in any shape a destination's constraints give it",
    ),
  keyValues: z
    .string()
    .max(4096)
    .optional()
    .describe('with keyPrefix: the business values as a JSON array, e.g. `["A-1001"]` (`[1001]` makes another key)'),
});

/** An id of the execution's event stream (src/http/execution-events.ts `parseEventId`): `<n>.<m>`, or `<n>.<m>.end`. */
export const EVENT_STREAM_ID_SOURCE = String.raw`\d{1,15}\.\d{1,15}(?:\.end)?`;

export const ExecutionEventsQuery = z.object({
  lastEventId: z
    .string()
    .regex(new RegExp(`^${EVENT_STREAM_ID_SOURCE}$`))
    .optional()
    .describe("resume after this event id (as the `Last-Event-ID` header, which wins when both are sent)"),
});

export const StatsQuery = z.object({
  since: DateTime.optional().describe("sum over executions created at or after this time; default 24 hours ago"),
});

/** `GET /v1/stats/series` (src/http/routes/stats.ts checks the range: bounds, order, buckets at most). */
export const StatsSeriesQuery = z.object({
  bucket: z.enum(["hour", "day"]).default("hour").describe("the size of a bucket (UTC hours, or UTC days)"),
  since: DateTime.optional().describe("the first bucket holds this time; default 24 hours (bucket=hour) or 30 days (day) before `until`"),
  until: DateTime.optional().describe("the last bucket ends at or after this time; default now"),
  workflowId: z
    .string()
    .regex(WORKFLOW_ID_PATTERN, "letters, digits, `_` or `-` (at most 64)")
    .optional()
    .describe("only this workflow's executions; default every workflow of the workspace, and its events"),
});

/** `POST /v1/events` (SPEC section 14); src/events/ingest.ts checks each member and names the one it refuses. */
/**
 * A correlation value as src/lib/correlation.ts accepts it: a string with a non-space character,
 * or a number JSON carries exactly; at most MAX_MATCH_BYTES as canonical JSON (a string's quotes and
 * escapes count; `maxLength` states the ASCII bound, the description the byte rule).
 */
const Correlation = z.union([
  z
    .string()
    .min(1)
    .max(MAX_MATCH_BYTES - 2)
    .regex(/\S/, "not only spaces")
    .describe(`a string with a non-space character, at most ${MAX_MATCH_BYTES} bytes as JSON (with its quotes and escapes)`),
  z.number().min(-MAX_EXACT_NUMBER).max(MAX_EXACT_NUMBER).describe("a number JSON carries exactly: at most 2^53 − 1 in magnitude"),
]);

export const EventBody = z.object({
  name: z
    .string()
    .regex(EVENT_NAME_PATTERN, "letters, digits, `.`, `_`, `:` or `-`, starting with a letter or digit (at most 200)")
    .describe("the event's name, e.g. `payment.confirmed`: a WAIT_FOR_EVENT's `event`"),
  match: Correlation.describe("the correlation value: a wait whose `match` gives the same value takes it"),
  id: z
    .string()
    .regex(new RegExp(KEY_PATTERN), "1–255 printable ASCII")
    .optional()
    .describe(
      "the sender's id of the event (1–255 printable ASCII): deliveries with the same id are one event; without it, the content decides",
    ),
  data: z
    .unknown()
    .optional()
    .describe(
      `any JSON (at most ${MAX_EVENT_DATA_BYTES / 1024} KiB as JSON; every number at most 2^53 − 1 in magnitude): ` +
        "the waiting step's output carries it",
    ),
});

/** `PUT /v1/event-sources/{name}`: the route validates with this very schema (src/events/source-definition.ts). */
export { EventSourceDefinition } from "../../events/source-definition";

export const WaitListQuery = z.object({
  event: z.string().min(1).describe("the event name the waits wait for"),
  match: z
    .string()
    .min(1)
    .max(MAX_MATCH_BYTES - 2)
    .regex(/\S/, "not only spaces")
    .optional()
    .describe(
      "only waits on this value: the text as a string and, when it is JSON, as that value too " +
        '(`1001`: "1001" or 1001); `"1001"` only the string',
    ),
  limit: z.int().min(1).max(100).default(50),
});

export { ConnectorDefinition } from "../../connectors/schema";

export const WorkflowListQuery = z.object({
  after: z.string().optional().describe("the `next` of the previous page"),
  limit: z.int().min(1).max(500).default(100),
});

export const WorkflowReadQuery = z.object({
  version: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional()
    .describe("a version a PUT returned; default the latest"),
});

// The trigger's and the test run's queries belong to ingress, which parses with them.
export { TestRunQuery, TriggerQuery };

export const RetryBody = z.strictObject({
  acknowledgeForgottenKey: z
    .boolean()
    .optional()
    .describe("true: re-send a key the retention guard refused, after checking by hand (recorded in the trace)"),
});

export const CancelBody = z.strictObject({
  releaseIdentity: z.boolean().optional().describe("true: the next identical trigger starts a new execution"),
  compensate: z
    .boolean()
    .optional()
    .describe('true: undo the completed steps that declare `compensate` (the execution goes COMPENSATING; docs/steps.md "Compensation")'),
});

/** The most a secret value may hold: it is sent in an HTTP header. */
export const MAX_SECRET_VALUE_BYTES = 4096;

export const SecretBody = z.strictObject({
  value: z
    .string()
    .min(1)
    // A header cannot carry CR, LF or NUL: refused now rather than failing every step later.
    // eslint-disable-next-line no-control-regex
    .refine((v) => new TextEncoder().encode(v).byteLength <= MAX_SECRET_VALUE_BYTES && !/[\u0000-\u001f\u007f]/.test(v), {
      message: `at most ${MAX_SECRET_VALUE_BYTES} UTF-8 bytes, no control characters`,
    })
    .describe("1–4096 UTF-8 bytes without control characters; never readable back"),
});

/**
 * The JSON object a trigger sends: any JSON (the entry point may select `idempotencyFields` from it).
 * Every number in it must be one a 64-bit float carries exactly (src/lib/json-numbers.ts); the document
 * states that in the description, since a recursive "any JSON" schema is stated as `{}` (components.ts).
 */
export const TriggerPayload = z
  .json()
  .describe(
    `any JSON value; every number in it at most ${MAX_EXACT_NUMBER} (2^53 − 1) in magnitude and finite, else 422 json-number-out-of-range`,
  );
