/**
 * `GET /v1/openapi.json`: the OpenAPI 3.1 document of the whole HTTP API, built once per isolate
 * (on first request) from zod schemas with zod 4's own `z.toJSONSchema`: request shapes in input
 * mode (./requests.ts, the workflow definition being the schema the PUT validates with), response
 * shapes in output mode (./responses.ts). Nothing here restates a shape; this file says which
 * route answers which schema with which status, and which problem codes each status can carry.
 *
 * Public (no bearer token): it describes the API and holds no data. test/http/openapi.test.ts
 * fails when a route of the app is missing here; the e2e validates every answer against it.
 */
import { z } from "zod";
import { CONNECTOR_NAME_PATTERN, VERTEX_ID_PATTERN, WORKFLOW_ID_PATTERN } from "../../definitions/schema";
import { SECRET_NAME_PATTERN } from "../../definitions/secrets";
import { EVENT_SOURCE_NAME_PATTERN } from "../../events/source-definition";
import { MAX_EXACT_NUMBER } from "../../lib/json-numbers";
import { IDEMPOTENCY_KEY_HEADER_PATTERN } from "./patterns";
import * as req from "./requests";
import * as res from "./responses";

type ProblemCode = (typeof res.PROBLEM_CODES)[number];
type Problems = Partial<Record<number, readonly ProblemCode[]>>;

interface Answer {
  description: string;
  /** A JSON body; omitted: no body (204) or `contentType` with its own `bodySchema`. */
  schema?: z.ZodType;
  contentType?: string;
  /** For a non-JSON body (the event stream): its JSON Schema. */
  bodySchema?: Record<string, unknown>;
  headers?: readonly HeaderName[];
}

interface Operation {
  method: "get" | "put" | "post" | "delete";
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  /** No bearer token: the route authenticates otherwise (a signature) or not at all. */
  public?: boolean;
  /** An operator token (`OPERATOR_TOKENS`) instead of a workspace's. */
  operator?: boolean;
  query?: z.ZodObject;
  /**
   * Query names the route refuses itself with a problem more precise than `query-parameter-unknown`
   * (src/http/route-check.ts lets them through; the document does not list them).
   */
  refusedQuery?: readonly string[];
  headers?: readonly HeaderParameter[];
  body?: { schema: z.ZodType; required: boolean; description: string; contentType?: string };
  answers: Record<number, Answer>;
  problems: Problems;
}

interface HeaderParameter {
  name: string;
  required: boolean;
  description: string;
  schema?: Record<string, unknown>;
}

const HEADERS = {
  location: { description: "where the created or named resource is read", schema: { type: "string" } },
  "idempotent-replayed": {
    description: "`true` when this answer is the stored answer of an earlier request with the same Idempotency-Key",
    schema: { type: "string", enum: ["true"] },
  },
  "retry-after": { description: "seconds to wait before retrying the same request", schema: { type: "string" } },
  "www-authenticate": { description: 'Bearer realm="idemflow"', schema: { type: "string" } },
  "execution-removed-at": {
    description: "on an archived trace (`archived: true`) only: when the history sweep removed its rows from the database",
    schema: { type: "string", format: "date-time" },
  },
} as const;
type HeaderName = keyof typeof HEADERS;

const idempotencyKey = (required: boolean): HeaderParameter => ({
  name: "Idempotency-Key",
  required,
  description: required
    ? "Required: one unique key per operation, the same on every retry of it; a retry replays the first answer."
    : "Honoured when sent: a retry with the same key replays the first answer; the same key with another request is refused.",
  schema: {
    type: "string",
    minLength: 1,
    pattern: IDEMPOTENCY_KEY_HEADER_PATTERN,
    description:
      'a key of 1–255 printable ASCII characters (0x20–0x7E): bare (no `,`, not starting with `"`), or an RFC 8941 sf-string ' +
      '(`"…"`, with `"` and `\\` escaped by `\\`) for a key holding a comma',
  },
});

/**
 * A path parameter's schema: the pattern the route checks it with (a name outside it is refused, or
 * cannot exist). By the parameter's name, and for `{name}` by the collection it names.
 */
function pathParameterSchema(path: string, name: string): Record<string, unknown> {
  const pattern = (re: RegExp) => ({ type: "string", pattern: re.source });
  if (name === "workflowId") return pattern(WORKFLOW_ID_PATTERN);
  if (name === "vertexId") return pattern(VERTEX_ID_PATTERN);
  if (name === "source" || (name === "name" && path.startsWith("/v1/event-sources/"))) return pattern(EVENT_SOURCE_NAME_PATTERN);
  if (name === "name" && path.startsWith("/v1/secrets/")) return pattern(SECRET_NAME_PATTERN);
  if (name === "name" && path.startsWith("/v1/connectors/")) return pattern(CONNECTOR_NAME_PATTERN);
  return { type: "string", minLength: 1 };
}

// ---- problem sets ------------------------------------------------------------------------------

/** Every authenticated route: the token, and the workspace's shard (src/shards: placement, schema, configuration). */
const AUTH: Problems = {
  401: ["unauthorized"],
  500: ["internal-error"],
  503: ["shards-misconfigured", "shard-schema-behind", "workspace-misplaced"],
};
const GUARDED: Problems = {
  400: ["idempotency-key-invalid"],
  409: ["idempotency-key-in-progress", "idempotency-key-lost"],
  413: ["payload-too-large"],
  422: ["idempotency-key-mismatch"],
  500: ["idempotency-response-too-large"],
  503: ["idempotency-ledger-unavailable", "idempotency-ledger-error"],
};
const KEY_REQUIRED: Problems = { 400: ["idempotency-key-missing"] };
const START: Problems = {
  400: ["malformed-json", "json-too-deep", "force-new-execution-not-allowed", "client-idempotency-id-invalid"],
  404: ["not-found"],
  413: ["payload-too-large", "stored-payload-too-large"],
  415: ["idempotency-fields-need-json"],
  422: ["idempotency-field-missing", "idempotency-field-empty", "json-number-out-of-range", "edge-condition-failed"],
};

/**
 * What every `/v1` operation can answer before its route runs (src/http/route-check.ts, src/http/auth.ts):
 * a query parameter it does not list, and — except the public document — a deployment without tokens.
 */
const surfaceProblems = (op: Operation): Problems =>
  op.path.startsWith("/v1/")
    ? { 400: ["query-parameter-unknown"], ...(op.public ? {} : { 503: ["tokens-not-configured"] as ProblemCode[] }) }
    : {};

function merge(...sets: Problems[]): Problems {
  const merged: Record<number, ProblemCode[]> = {};
  for (const set of sets) {
    for (const [status, codes] of Object.entries(set)) {
      const list = (merged[Number(status)] ??= []);
      for (const code of codes ?? []) if (!list.includes(code)) list.push(code);
    }
  }
  return merged;
}

const json = (description: string, schema: z.ZodType, headers?: readonly HeaderName[]): Answer => ({ description, schema, headers });

const startAnswers = (what: string): Record<number, Answer> => ({
  200: json(`a duplicate of an execution already started: ${what} names it (deduplicated: true)`, res.StartResult, ["location"]),
  202: json(`a new execution started (${what})`, res.StartResult, ["location"]),
});

// ---- the routes ----------------------------------------------------------------------------------

export const OPERATIONS: readonly Operation[] = [
  {
    method: "get",
    path: "/health",
    operationId: "health",
    summary: "Liveness",
    tag: "meta",
    public: true,
    answers: { 200: json("the Worker answers", res.Health) },
    problems: {},
  },
  {
    method: "get",
    path: "/v1/openapi.json",
    operationId: "openApiDocument",
    summary: "This document (public: it describes the API and holds no data)",
    tag: "meta",
    public: true,
    answers: { 200: json("the OpenAPI 3.1 document", res.OpenApiDocument) },
    problems: {},
  },
  {
    method: "get",
    path: "/v1/workflows",
    operationId: "listWorkflows",
    summary: "List the workspace's workflows, by id",
    tag: "workflows",
    query: req.WorkflowListQuery,
    answers: { 200: json("a page of workflows", res.WorkflowList) },
    problems: merge(AUTH, { 400: ["invalid-limit"] }),
  },
  {
    method: "put",
    path: "/v1/workflows/{workflowId}",
    operationId: "saveWorkflow",
    summary: "Save a definition (validated; 422 lists every error with its JSON Pointer)",
    tag: "workflows",
    body: { schema: req.WorkflowDefinition, required: true, description: "the workflow definition; its `id` equals the path's" },
    answers: {
      200: json("unchanged: this definition is already the latest version", res.SavedWorkflow, ["location"]),
      201: json("a new version saved", res.SavedWorkflow, ["location"]),
    },
    problems: merge(AUTH, {
      400: ["malformed-json", "json-too-deep"],
      413: ["payload-too-large"],
      422: ["invalid-definition", "keyless-write-refused"],
    }),
  },
  {
    method: "get",
    path: "/v1/workflows/{workflowId}",
    operationId: "readWorkflow",
    summary: "Read a workflow (latest or a version); a scheduled workflow's recent scheduled runs",
    tag: "workflows",
    query: req.WorkflowReadQuery,
    answers: { 200: json("the stored version", res.StoredWorkflowRead) },
    problems: merge(AUTH, { 400: ["invalid-version"], 404: ["not-found"] }),
  },
  {
    method: "post",
    path: "/v1/workflows/{workflowId}/trigger",
    operationId: "trigger",
    summary: "Production trigger: always deduplicated on its identity",
    tag: "runs",
    query: req.TriggerQuery,
    // A test run's `forceNewExecution` on a production trigger: 400 force-new-execution-not-allowed.
    refusedQuery: Object.keys(req.TestRunQuery.shape),
    headers: [idempotencyKey(false)],
    body: { schema: req.TriggerPayload, required: true, description: "the payload (JSON, or any bytes when the identity is its content)" },
    answers: startAnswers("executionId"),
    problems: merge(AUTH, GUARDED, START),
  },
  {
    method: "post",
    path: "/v1/workflows/{workflowId}/test-runs",
    operationId: "testRun",
    summary: "Test run (a new execution each time by default); `Prefer: wait=N` answers the trace",
    tag: "runs",
    query: req.TestRunQuery,
    headers: [
      { name: "Prefer", required: false, description: "`wait=N`: wait up to N seconds and answer the trace", schema: { type: "string" } },
    ],
    body: { schema: req.TriggerPayload, required: true, description: "the payload" },
    answers: {
      200: json(
        "with `Prefer: wait`: the finished trace; without: a duplicate's StartResult",
        z.union([res.StartResult, res.TestRunTrace]),
        ["location"],
      ),
      202: json("without `Prefer: wait`: started; with it: the trace so far, still running", z.union([res.StartResult, res.TestRunTrace]), [
        "location",
      ]),
    },
    problems: merge(AUTH, START, { 400: ["force-new-execution-invalid"] }),
  },
  {
    method: "post",
    path: "/v1/workflows/{workflowId}/stream",
    operationId: "streamRun",
    summary: "Test run streamed as server-sent events until it ends, or until its bound (then continue on GET …/events)",
    tag: "runs",
    query: req.TestRunQuery,
    body: { schema: req.TriggerPayload, required: true, description: "the payload" },
    answers: {
      200: {
        description: "a duplicate: the events of the existing execution",
        contentType: "text/event-stream",
        bodySchema: { type: "string" },
      },
      202: {
        description:
          "a new execution: its events; ends with `execution.finished`, or with `stream.timeout` after 240 polls or 60 s " +
          "while it still runs — every id is a position of GET /v1/executions/{executionId}/events: continue there with Last-Event-ID",
        contentType: "text/event-stream",
        bodySchema: { type: "string" },
      },
    },
    problems: merge(AUTH, START, { 400: ["force-new-execution-invalid"] }),
  },
  {
    method: "post",
    path: "/hooks/{workspaceId}/{workflowId}",
    operationId: "signedHook",
    summary: "Public webhook of an entry point with `webhook.signature` (the signature authenticates)",
    tag: "runs",
    public: true,
    headers: [
      {
        name: "x-idemflow-signature",
        required: true,
        description: "`v1=<hex HMAC-SHA256 of v1:<timestamp>:<workspaceId>:<workflowId>:<raw body>>`",
      },
      { name: "x-idemflow-timestamp", required: true, description: "Unix seconds, within the tolerance (default 300 s)" },
    ],
    body: { schema: req.TriggerPayload, required: true, description: "the signed payload" },
    answers: startAnswers("executionId"),
    problems: merge(START, {
      400: ["client-idempotency-id-not-signed"],
      // One answer for an unknown workspace or workflow and every signature refusal (src/http/public-answer.ts).
      401: ["delivery-rejected"],
      500: ["internal-error"],
      503: ["delivery-unavailable"],
    }),
  },
  {
    method: "get",
    path: "/v1/executions",
    operationId: "listExecutions",
    summary: "List executions, newest first, with filters and a cursor; or search them by a business id or a destination key",
    tag: "executions",
    query: req.ExecutionListQuery,
    answers: { 200: json("a page of executions", res.ExecutionPage) },
    problems: merge(AUTH, { 400: ["invalid-query", "invalid-cursor"] }),
  },
  {
    method: "get",
    path: "/v1/executions/{executionId}",
    operationId: "readTrace",
    summary: "The trace: every step, its attempts, events and keys (of a swept execution: its archived trace)",
    tag: "executions",
    answers: {
      200: json(
        "the trace; for an execution the history sweep removed, the trace it archived, with `archived: true` (docs/history-archive.md)",
        res.Trace,
        ["execution-removed-at"],
      ),
    },
    problems: merge(AUTH, { 404: ["not-found", "execution-not-retained"] }),
  },
  {
    method: "delete",
    path: "/v1/executions/{executionId}",
    operationId: "eraseExecution",
    summary: "Erase a finished execution (and its start-over / reuse chain) from the database and the archive",
    tag: "executions",
    headers: [idempotencyKey(true)],
    answers: {
      200: json("erased (or, for an execution already swept, its archived trace deleted)", res.ErasureResult, ["idempotent-replayed"]),
    },
    problems: merge(AUTH, GUARDED, KEY_REQUIRED, {
      404: ["not-found"],
      409: ["execution-chain-running", "execution-chain-too-long", "erasure-conflict"],
      503: ["archive-unbound"],
    }),
  },
  {
    method: "get",
    path: "/v1/executions/{executionId}/events",
    operationId: "executionEvents",
    summary: "The execution's changes as server-sent events, resumable with Last-Event-ID (docs/events.md)",
    tag: "executions",
    query: req.ExecutionEventsQuery,
    headers: [
      {
        name: "Last-Event-ID",
        required: false,
        description: "the id of the last event received: the stream delivers exactly the changes after it (docs/events.md)",
        schema: { type: "string", pattern: `^(?:${req.EVENT_STREAM_ID_SOURCE})?$` },
      },
    ],
    answers: {
      200: {
        description:
          "`text/event-stream` of `attempt` and `step.event`; ends with `execution.finished` (final) " +
          "or `stream.end` (the per-connection bound: reconnect with Last-Event-ID)",
        contentType: "text/event-stream",
        bodySchema: { type: "string" },
      },
    },
    problems: merge(AUTH, { 400: ["invalid-query", "invalid-cursor"], 404: ["not-found"], 410: ["execution-removed"] }),
  },
  {
    method: "post",
    path: "/v1/executions/{executionId}/steps/{vertexId}/retry",
    operationId: "retryStep",
    summary: "Operator retry of a FAILED step, with the same persisted key",
    tag: "executions",
    headers: [idempotencyKey(true)],
    body: { schema: req.RetryBody, required: false, description: "optional" },
    answers: { 202: json("the step is DISPATCHED again", res.RetryAccepted, ["idempotent-replayed"]) },
    problems: merge(AUTH, GUARDED, KEY_REQUIRED, {
      400: ["malformed-json", "json-too-deep", "invalid-retry-body"],
      404: ["not-found"],
      409: ["step-not-failed", "destination-key-may-be-forgotten", "execution-cancelled", "live-execution-exists", "execution-superseded"],
      410: ["execution-removed"],
    }),
  },
  {
    method: "post",
    path: "/v1/executions/{executionId}/start-over",
    operationId: "startOver",
    summary: "A new execution from the same trigger, pinned to the same version, linked to this one",
    tag: "executions",
    headers: [idempotencyKey(true)],
    answers: { 202: json("the new execution started", res.StartOverResult, ["idempotent-replayed"]) },
    problems: merge(AUTH, GUARDED, KEY_REQUIRED, {
      404: ["not-found"],
      409: ["execution-running", "live-execution-exists", "execution-superseded"],
      410: ["execution-removed"],
      422: ["json-number-out-of-range", "edge-condition-failed"],
    }),
  },
  {
    method: "post",
    path: "/v1/executions/{executionId}/cancel",
    operationId: "cancel",
    summary: "Cancel: the execution and its in-flight steps become CANCELLED at once",
    tag: "executions",
    headers: [idempotencyKey(true)],
    body: { schema: req.CancelBody, required: false, description: "optional" },
    answers: { 200: json("cancelled now, or already cancelled", res.CancelResult, ["idempotent-replayed"]) },
    problems: merge(AUTH, GUARDED, KEY_REQUIRED, {
      400: ["malformed-json", "json-too-deep", "invalid-cancel-body"],
      404: ["not-found"],
      409: ["execution-not-cancellable"],
      410: ["execution-removed"],
    }),
  },
  {
    method: "get",
    path: "/v1/stats",
    operationId: "stats",
    summary: "Duplicates stopped, per workflow of the workspace",
    tag: "executions",
    query: req.StatsQuery,
    answers: { 200: json("the sums per workflow and in total", res.Stats) },
    problems: merge(AUTH, { 400: ["invalid-query"] }),
  },
  {
    method: "get",
    path: "/v1/stats/series",
    operationId: "statsSeries",
    summary: "Duplicates stopped per boundary and executions by status, per hour or day, from the hourly rollup",
    tag: "executions",
    query: req.StatsSeriesQuery,
    answers: { 200: json("every bucket of the range, and the total", res.StatsSeries) },
    problems: merge(AUTH, { 400: ["invalid-query"] }),
  },
  {
    method: "post",
    path: "/v1/events",
    operationId: "sendEvent",
    summary: "Send an event: it resumes the wait that matches it, or waits in the buffer for one (deduplicated by id or content)",
    tag: "events",
    headers: [idempotencyKey(false)],
    body: { schema: req.EventBody, required: true, description: "`{ name, match, id?, data? }`" },
    answers: {
      200: json("a duplicate: the first delivery's outcome", res.EventAnswer, ["idempotent-replayed"]),
      202: json("a new event: the waits it resumed, or buffered", res.EventAnswer, ["idempotent-replayed"]),
    },
    problems: merge(AUTH, GUARDED, {
      400: ["malformed-json", "json-too-deep"],
      413: ["payload-too-large"],
      422: ["event-invalid", "json-number-out-of-range"],
    }),
  },
  {
    method: "get",
    path: "/v1/waits",
    operationId: "listWaits",
    summary: "The executions waiting for an event (and a correlation value), oldest first, with their timeouts",
    tag: "events",
    query: req.WaitListQuery,
    answers: { 200: json("the open waits", res.WaitList) },
    problems: merge(AUTH, { 400: ["invalid-query"], 422: ["event-invalid"] }),
  },
  {
    method: "get",
    path: "/v1/event-sources",
    operationId: "listEventSources",
    summary: "The workspace's event sources (how providers' signed webhooks become events), by name",
    tag: "events",
    answers: { 200: json("every source", res.EventSourceList) },
    problems: AUTH,
  },
  {
    method: "put",
    path: "/v1/event-sources/{name}",
    operationId: "putEventSource",
    summary: "Create or replace an event source: its signature scheme, its secret (a template) and the expressions that read the event",
    tag: "events",
    body: {
      schema: req.EventSourceDefinition,
      required: true,
      description: "`{ scheme, secret, name, match, id?, data?, toleranceSeconds? }`",
    },
    answers: {
      200: json("replaced, or the same definition again", res.EventSource, ["location"]),
      201: json("created", res.EventSource, ["location"]),
    },
    problems: merge(AUTH, {
      400: ["malformed-json", "json-too-deep"],
      413: ["payload-too-large"],
      422: ["event-source-invalid"],
    }),
  },
  {
    method: "get",
    path: "/v1/event-sources/{name}",
    operationId: "getEventSource",
    summary: "One event source, with the path its provider posts to",
    tag: "events",
    answers: { 200: json("the source", res.EventSource) },
    problems: merge(AUTH, { 404: ["event-source-not-found"] }),
  },
  {
    method: "delete",
    path: "/v1/event-sources/{name}",
    operationId: "deleteEventSource",
    summary: "Delete an event source: its deliveries answer 404 from now on",
    tag: "events",
    answers: { 204: { description: "deleted" } },
    problems: merge(AUTH, { 404: ["event-source-not-found"] }),
  },
  {
    method: "post",
    path: "/events/{workspaceId}/{source}",
    operationId: "deliverSourceEvent",
    summary: "Public: a provider's signed webhook, made an event by the workspace's event source (the signature authenticates)",
    tag: "events",
    public: true,
    headers: [
      { name: "webhook-id", required: false, description: "standard-webhooks: the message id (the event id unless the source reads one)" },
      { name: "webhook-timestamp", required: false, description: "standard-webhooks: Unix seconds, within the tolerance (default 300 s)" },
      {
        name: "webhook-signature",
        required: false,
        description: "standard-webhooks: `v1,<base64 HMAC-SHA256 of <webhook-id>.<webhook-timestamp>.<raw body>>`, space-separated entries",
      },
      {
        name: "x-idemflow-signature",
        required: false,
        description: "v1: `v1=<hex HMAC-SHA256 of v1:<timestamp>:<workspaceId>:events/<source>:<raw body>>`",
      },
      { name: "x-idemflow-timestamp", required: false, description: "v1: Unix seconds, within the tolerance (default 300 s)" },
    ],
    body: { schema: req.TriggerPayload, required: true, description: "the provider's signed JSON body" },
    answers: {
      200: json("a duplicate: the first delivery's outcome", res.EventAnswer),
      202: json("a new event: the waits it resumed, or buffered", res.EventAnswer),
    },
    problems: {
      400: ["malformed-json", "json-too-deep"],
      // One answer for an unknown workspace or source and every signature refusal (src/http/public-answer.ts).
      401: ["delivery-rejected"],
      413: ["payload-too-large"],
      422: ["event-extract-failed", "event-invalid", "json-number-out-of-range"],
      500: ["internal-error"],
      503: ["delivery-unavailable"],
    },
  },
  {
    method: "put",
    path: "/v1/connectors/{name}",
    operationId: "putConnector",
    summary: "Save a connector: a reusable destination whose key a step through it cannot drop or override",
    tag: "connectors",
    body: { schema: req.ConnectorDefinition, required: true, description: "the connector (docs/connectors.md)" },
    answers: {
      200: json("this document was already the saved version", res.SavedConnector, ["location"]),
      201: json("a new version", res.SavedConnector, ["location"]),
    },
    problems: merge(AUTH, { 400: ["malformed-json", "json-too-deep"], 413: ["payload-too-large"], 422: ["connector-invalid"] }),
  },
  {
    method: "get",
    path: "/v1/connectors",
    operationId: "listConnectors",
    summary: "The workspace's connectors (their latest versions)",
    tag: "connectors",
    answers: { 200: json("the connectors", res.ConnectorList) },
    problems: AUTH,
  },
  {
    method: "get",
    path: "/v1/connectors/{name}",
    operationId: "getConnector",
    summary: "A connector: its latest version, or `?version=`",
    tag: "connectors",
    query: req.WorkflowReadQuery,
    answers: { 200: json("the connector", res.StoredConnectorRead) },
    problems: merge(AUTH, { 400: ["invalid-version"], 404: ["not-found"] }),
  },
  {
    method: "delete",
    path: "/v1/connectors/{name}",
    operationId: "deleteConnector",
    summary: "Delete a connector (saved workflow versions keep their resolved steps)",
    tag: "connectors",
    answers: { 204: { description: "deleted" } },
    problems: merge(AUTH, { 404: ["not-found"] }),
  },
  {
    method: "get",
    path: "/v1/secrets",
    operationId: "listSecrets",
    summary: "Names of the workspace's secrets with their times (never a value)",
    tag: "secrets",
    answers: { 200: json("the names", res.SecretList) },
    problems: AUTH,
  },
  {
    method: "put",
    path: "/v1/secrets/{name}",
    operationId: "putSecret",
    summary: "Create or replace a workspace secret (write-only)",
    tag: "secrets",
    body: { schema: req.SecretBody, required: true, description: "exactly `{ value }`" },
    answers: { 200: json("stored", res.SecretListing) },
    problems: merge(AUTH, {
      400: ["malformed-json", "json-too-deep"],
      413: ["payload-too-large"],
      422: ["secret-name-invalid", "secret-name-reserved", "secret-value-invalid"],
      503: ["secrets-master-key-missing"],
    }),
  },
  {
    method: "delete",
    path: "/v1/secrets/{name}",
    operationId: "deleteSecret",
    summary: "Delete a workspace secret",
    tag: "secrets",
    answers: { 204: { description: "deleted" } },
    problems: merge(AUTH, { 404: ["not-found"] }),
  },
  {
    method: "get",
    path: "/v1/operator/storage",
    operationId: "operatorStorage",
    summary: "The database's size, limit, executions retained and bytes per execution (operator token only)",
    tag: "operator",
    operator: true,
    answers: { 200: json("the figures, with a note on reading them", res.StorageFigures) },
    problems: merge(AUTH, { 403: ["operator-token-required"] }),
  },
  {
    method: "post",
    path: "/demo/orders",
    operationId: "demoOrder",
    summary: "Demo: an endpoint behind the Idempotency-Key middleware",
    tag: "demo",
    headers: [idempotencyKey(true)],
    body: { schema: req.TriggerPayload, required: true, description: "any JSON" },
    answers: { 201: json("the order", res.DemoOrder, ["location", "idempotent-replayed"]) },
    problems: merge(AUTH, GUARDED, KEY_REQUIRED, { 400: ["malformed-json"] }),
  },
  {
    method: "post",
    path: "/demo/orders-unguarded",
    operationId: "demoOrderUnguarded",
    summary: "Demo: the same handler without the middleware (for the benchmark)",
    tag: "demo",
    body: { schema: req.TriggerPayload, required: true, description: "any JSON" },
    answers: { 201: json("the order", res.DemoOrder, ["location"]) },
    problems: merge(AUTH, { 400: ["malformed-json"] }),
  },
];

// ---- generation --------------------------------------------------------------------------------

const COMPONENT_PREFIX = "#/components/schemas/";
type JsonSchema = Record<string, unknown>;

/** The component schemas: responses in output mode, request bodies in input mode. */
const RESPONSE_COMPONENTS: Record<string, z.ZodType> = {
  Problem: res.Problem,
  Health: res.Health,
  OpenApiDocument: res.OpenApiDocument,
  WorkflowList: res.WorkflowList,
  SavedWorkflow: res.SavedWorkflow,
  StoredWorkflowRead: res.StoredWorkflowRead,
  WorkflowDefinition: req.WorkflowDefinition,
  ScheduleRun: res.ScheduleRun,
  StartResult: res.StartResult,
  StartOverResult: res.StartOverResult,
  DuplicatesStopped: res.DuplicatesStopped,
  DuplicateTrigger: res.DuplicateTrigger,
  ExecutionSummary: res.ExecutionSummary,
  ExecutionPage: res.ExecutionPage,
  RemovedExecution: res.RemovedExecution,
  KeySend: res.KeySend,
  Trace: res.Trace,
  TestRunTrace: res.TestRunTrace,
  Step: res.Step,
  Attempt: res.Attempt,
  StepEvent: res.StepEvent,
  DestinationKey: res.DestinationKey,
  RetryAccepted: res.RetryAccepted,
  CancelResult: res.CancelResult,
  ErasureResult: res.ErasureResult,
  Stats: res.Stats,
  StatsSeries: res.StatsSeries,
  StorageFigures: res.StorageFigures,
  SecretListing: res.SecretListing,
  SecretList: res.SecretList,
  SavedConnector: res.SavedConnector,
  StoredConnectorRead: res.StoredConnectorRead,
  ConnectorList: res.ConnectorList,
  EventSource: res.EventSource,
  EventSourceList: res.EventSourceList,
  EventSourceDefinition: req.EventSourceDefinition,
  DemoOrder: res.DemoOrder,
};
const REQUEST_COMPONENTS: Record<string, z.ZodType> = {
  WorkflowDefinitionInput: req.WorkflowDefinition,
  RetryBody: req.RetryBody,
  CancelBody: req.CancelBody,
  SecretBody: req.SecretBody,
  ConnectorDefinition: req.ConnectorDefinition,
  EventSourceDefinitionInput: req.EventSourceDefinition,
  JsonPayload: req.TriggerPayload,
};

/**
 * zod's registry output, made OpenAPI components: no per-schema `$schema`/`$id` (the document's
 * dialect is 2020-12), and the schemas zod shares under `__shared` (those with a global `id`,
 * such as `JsonValue`) hoisted to components of their own.
 */
function componentSchemas(components: Record<string, z.ZodType>, io: "input" | "output"): Map<z.ZodType, string> & { schemas: JsonSchema } {
  const registry = z.registry<{ id: string }>();
  const names = new Map<z.ZodType, string>();
  for (const [id, schema] of Object.entries(components)) {
    registry.add(schema, { id });
    names.set(schema, id);
  }
  const generated = z.toJSONSchema(registry, { io, target: "draft-2020-12", uri: (id) => `${COMPONENT_PREFIX}${id}` });
  const text = JSON.stringify(generated.schemas).replaceAll(`${COMPONENT_PREFIX}__shared#/$defs/`, COMPONENT_PREFIX);
  const raw = JSON.parse(text) as Record<string, JsonSchema>;
  const schemas: JsonSchema = {};
  for (const [id, schema] of Object.entries(raw)) {
    if (id === "__shared") {
      Object.assign(schemas, schema.$defs as JsonSchema);
      continue;
    }
    const { $schema: _dialect, $id: _id, ...rest } = schema;
    schemas[id] = rest;
  }
  return Object.assign(names, { schemas: plainJsonValues(schemas, new Set(Object.keys(components))) });
}

const ANY_JSON = "any JSON value";

/**
 * A JSON value (`z.json()`: a definition's `JsonValue`, a trigger's payload) is recursive: zod
 * states it as a union that holds an array and an object of itself, under an auto-generated name
 * (`schema0`) when no id names it. Common generators emit TypeScript from that union that does not
 * compile (openapi-typescript 7: TS2502, "referenced directly or indirectly in its own type
 * annotation"), and the auto-generated name leaks into the public document. To a client such a
 * schema is what it says — any JSON value — so it is stated as that (`{}` with its description),
 * and one without a name of ours is inlined where it is used.
 */
function plainJsonValues(schemas: JsonSchema, named: ReadonlySet<string>): JsonSchema {
  const isJsonValue = (name: string, schema: unknown): boolean => {
    const anyOf = (schema as { anyOf?: unknown } | undefined)?.anyOf;
    return (
      Array.isArray(anyOf) &&
      anyOf.some(
        (branch: { type?: unknown; items?: { $ref?: unknown } }) =>
          branch.type === "array" && branch.items?.$ref === `${COMPONENT_PREFIX}${name}`,
      )
    );
  };
  const recursive = Object.keys(schemas).filter((name) => isJsonValue(name, schemas[name]));
  const anonymous = new Set(
    recursive.filter((name) => !named.has(name) && !/^[A-Z]/.test(name)).map((name) => `${COMPONENT_PREFIX}${name}`),
  );
  // A named component that is only a reference to an anonymous JSON value (`z.json().describe(…)`) is one too.
  const aliases = Object.keys(schemas).filter((name) => {
    const { $ref, description: _description, ...rest } = schemas[name] as { $ref?: unknown; description?: unknown };
    return typeof $ref === "string" && anonymous.has($ref) && Object.keys(rest).length === 0;
  });
  const out: JsonSchema = {};
  for (const [name, schema] of Object.entries(schemas)) {
    if (anonymous.has(`${COMPONENT_PREFIX}${name}`)) continue;
    const description = (schema as { description?: string }).description;
    // Stated as "anything", with the number bound every body is checked against (src/lib/json-numbers.ts:
    // every number, at any depth, at most 2^53 − 1 in magnitude; `minimum`/`maximum` bind numbers only),
    // recursing through `unevaluatedItems`/`unevaluatedProperties` (here: every item, every member) rather
    // than a self-referencing `anyOf`, so generators emit `unknown`, not a type that refers to itself (TS2502).
    out[name] =
      recursive.includes(name) || aliases.includes(name)
        ? {
            description: description ?? ANY_JSON,
            minimum: -MAX_EXACT_NUMBER,
            maximum: MAX_EXACT_NUMBER,
            unevaluatedItems: { $ref: `${COMPONENT_PREFIX}${name}` },
            unevaluatedProperties: { $ref: `${COMPONENT_PREFIX}${name}` },
          }
        : schema;
  }
  // A reference to an inlined one keeps the referrer's own members (its description).
  const inline = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(inline);
    if (value === null || typeof value !== "object") return value;
    const { $ref, ...rest } = value as Record<string, unknown>;
    if (typeof $ref === "string" && anonymous.has($ref)) return Object.keys(rest).length > 0 ? inline(rest) : { description: ANY_JSON };
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, inline(v)]));
  };
  return inline(out) as JsonSchema;
}

function inlineSchema(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, target: "draft-2020-12", unrepresentable: "any" }) as JsonSchema;
  return rest;
}

function buildDocument(): JsonSchema {
  const responses = componentSchemas(RESPONSE_COMPONENTS, "output");
  const requests = componentSchemas(REQUEST_COMPONENTS, "input");
  for (const name of Object.keys(requests.schemas)) {
    const existing = responses.schemas[name];
    if (existing !== undefined && JSON.stringify(existing) !== JSON.stringify(requests.schemas[name])) {
      throw new Error(`openapi: component ${name} differs between its input and output shapes`);
    }
  }
  const responseSchema = (schema: z.ZodType): JsonSchema => {
    const name = responses.get(schema);
    if (name) return { $ref: `${COMPONENT_PREFIX}${name}` };
    // A union of components (the test run's two answers): each branch by reference.
    if (schema instanceof z.ZodUnion) return { anyOf: (schema.options as z.ZodType[]).map(responseSchema) };
    return inlineSchema(schema, "output");
  };
  const requestSchema = (schema: z.ZodType): JsonSchema => {
    const name = requests.get(schema);
    return name ? { $ref: `${COMPONENT_PREFIX}${name}` } : inlineSchema(schema, "input");
  };

  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) {
    const parameters: unknown[] = [...op.path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({
      name,
      in: "path",
      required: true,
      schema: pathParameterSchema(op.path, name!),
    }));
    for (const [name, field] of Object.entries(op.query?.shape ?? {})) {
      const schema = field as z.ZodType;
      parameters.push({
        name,
        in: "query",
        required: !schema.safeParse(undefined).success,
        ...(schema.description ? { description: schema.description } : {}),
        schema: inlineSchema(schema, "input"),
      });
    }
    for (const h of op.headers ?? []) {
      parameters.push({
        name: h.name,
        in: "header",
        required: h.required,
        description: h.description,
        schema: h.schema ?? { type: "string" },
      });
    }

    const answers: Record<string, unknown> = {};
    for (const [status, answer] of Object.entries(op.answers)) {
      const headers = answer.headers?.length ? { headers: Object.fromEntries(answer.headers.map((h) => [h, HEADERS[h]])) } : {};
      const content = answer.schema
        ? { content: { "application/json": { schema: responseSchema(answer.schema) } } }
        : answer.contentType
          ? { content: { [answer.contentType]: { schema: answer.bodySchema ?? {} } } }
          : {};
      answers[status] = { description: answer.description, ...headers, ...content };
    }
    for (const [status, codes] of Object.entries(merge(op.problems, surfaceProblems(op)))) {
      const headers =
        status === "401" && !op.public
          ? { headers: { "www-authenticate": HEADERS["www-authenticate"] } }
          : status === "409" || status === "503"
            ? { headers: { "retry-after": HEADERS["retry-after"] } }
            : {};
      const described = `problem+json, \`code\` one of: ${(codes ?? []).map((c) => `\`${c}\``).join(", ")}`;
      const existing = answers[status] as { description: string } | undefined;
      if (existing) throw new Error(`openapi: ${op.operationId} answers ${status} both as a result and as a problem`);
      answers[status] = {
        description: described,
        ...headers,
        content: { "application/problem+json": { schema: { $ref: `${COMPONENT_PREFIX}Problem` } } },
      };
    }

    paths[op.path] ??= {};
    paths[op.path]![op.method] = {
      operationId: op.operationId,
      summary: op.summary,
      tags: [op.tag],
      ...(op.public ? { security: [] } : op.operator ? { security: [{ operator: [] }] } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(op.body
        ? {
            requestBody: {
              required: op.body.required,
              description: op.body.description,
              content: { [op.body.contentType ?? "application/json"]: { schema: requestSchema(op.body.schema) } },
            },
          }
        : {}),
      responses: answers,
    };
  }

  return {
    openapi: "3.1.0",
    info: {
      title: "idemflow",
      version: "1",
      description:
        "A workflow engine where retries never become double charges. Every error is application/problem+json with a stable `code` " +
        "(docs/problems.md); an unknown route answers 404 `route-not-found`, a method a `/v1` path does not serve 405 " +
        "`method-not-allowed` with `Allow`, and a query parameter a `/v1` operation does not list 400 `query-parameter-unknown`. " +
        "Generated from the zod schemas of src/http/openapi.",
      // Not open source (yet): an SPDX custom reference, not a license this project does not grant.
      license: { name: "Proprietary", identifier: "LicenseRef-idemflow-proprietary" },
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    // Relative: the origin that served this document (under `npm start`, http://localhost:8787).
    servers: [{ url: "/", description: "the engine that served this document (npm start: http://localhost:8787)" }],
    security: [{ bearer: [] }],
    tags: [
      { name: "meta", description: "liveness and this document; no token" },
      { name: "workflows", description: "workflow definitions: versioned, validated on save" },
      { name: "runs", description: "starting executions: production triggers, test runs, streams, signed webhooks" },
      { name: "executions", description: "traces, lists, operator actions, erasure and the stats of duplicates stopped" },
      { name: "events", description: "events that resume WAIT_FOR_EVENT steps, and the waits open on them" },
      { name: "secrets", description: "the workspace's secrets: write-only" },
      { name: "connectors", description: "reusable destinations with their key rule, resolved into a workflow when it is saved" },
      { name: "operator", description: "the deployment's operator: figures that describe every workspace (an `OPERATOR_TOKENS` token)" },
      { name: "demo", description: "demo endpoints of the engine Worker itself" },
    ],
    paths,
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", description: "a token of `API_TOKENS`; it names the workspace (locally `dev-token`)" },
        operator: {
          type: "http",
          scheme: "bearer",
          description: "a token of `OPERATOR_TOKENS` (locally `operator-token`); it names no workspace and grants none",
        },
      },
      schemas: { ...responses.schemas, ...requests.schemas },
    },
  };
}

let built: string | undefined;

/** The document's JSON text, built on first use and kept for the isolate's life. */
export function openApiDocumentText(): string {
  built ??= JSON.stringify(buildDocument());
  return built;
}

export function openApiDocument(): JsonSchema {
  return JSON.parse(openApiDocumentText()) as JsonSchema;
}

/** The route handler: `app.get("/v1/openapi.json", serveOpenApi)`. */
export function serveOpenApi(): Response {
  return new Response(openApiDocumentText(), { headers: { "content-type": "application/json", "cache-control": "public, max-age=300" } });
}
