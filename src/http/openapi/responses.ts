/**
 * The response bodies of the HTTP API as zod schemas: what src/http/openapi/components.ts turns into
 * the OpenAPI document's component schemas (zod's own `z.toJSONSchema`, output shapes). TypeScript
 * types do not exist at run time, so these are the run-time statement of what each route answers;
 * the e2e (scripts/e2e.mjs) validates every answer it receives against the document, so a schema
 * here that stops matching its route fails a story. Every object is closed (`additionalProperties:
 * false` in the document): a member a route adds without a schema here fails too.
 */
import { z } from "zod";
import { WorkflowDefinition } from "../../definitions/schema";
import { MapTrace } from "./map-items";
import type { CommonProblemCode } from "../../lib/common-problems";
import type { DefinitionProblemCode } from "../../definitions/problems";
import type { IdempotencyProblemCode } from "../idempotency/problems";
import type { IngressProblemCode } from "../../ingress/problems";
import type { ExecutionProblemCode } from "../../steps/problems";
import type { SecretProblemCode } from "../../secrets/problems";
import type { NotificationProblemCode } from "../../notifications/problems";
import type { OperatorProblemCode } from "../routes/operator";
import type { ShardProblemCode } from "../../shards/problems";
import type { EventProblemCode } from "../../events/problems";
import type { ConnectorProblemCode } from "../../connectors/problems";
import type { HttpProblemCode } from "../problems";
import { EventSourceDefinition } from "../../events/source-definition";

/** A time the engine renders with `Date.prototype.toISOString` (UTC, `Z`). */
const Time = z.iso.datetime();
/** A time that may be absent (not happened yet, or outside what a Date can hold). */
const MaybeTime = Time.nullable();
const Count = z.int().min(0);

export const EXECUTION_STATUSES = [
  "RUNNING",
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "COMPENSATING",
  "COMPENSATED",
  "COMPENSATION_FAILED",
] as const;
export const ExecutionStatus = z.enum(EXECUTION_STATUSES);
export const StepState = z.enum(["DISPATCHED", "EXECUTING", "COMPLETED", "FAILED", "SKIPPED", "CANCELLED"]);
export const TriggerKind = z.enum(["webhook", "test", "stream", "schedule", "start_over"]);
export const IdentityKind = z.enum(["content", "fields", "client", "schedule", "forced"]);

// ---- problem+json (src/lib/problem.ts) ----------------------------------------------------------

type ProblemCode =
  | CommonProblemCode
  | DefinitionProblemCode
  | IdempotencyProblemCode
  | IngressProblemCode
  | ExecutionProblemCode
  | SecretProblemCode
  | NotificationProblemCode
  | OperatorProblemCode
  | ShardProblemCode
  | EventProblemCode
  | ConnectorProblemCode
  | HttpProblemCode;

/**
 * Every code the engine's catalogs answer (docs/problems.md; the demo destinations' own catalog is
 * another Worker's). Typed against the catalogs' unions both ways: a code not in a catalog does not
 * compile, and `MissingProblemCode` below fails to compile when a catalog gains a code not listed.
 */
export const PROBLEM_CODES = [
  "unauthorized",
  "not-found",
  "route-not-found",
  "malformed-json",
  "json-too-deep",
  "payload-too-large",
  "internal-error",
  "invalid-definition",
  "invalid-version",
  "invalid-limit",
  "idempotency-key-missing",
  "idempotency-key-invalid",
  "idempotency-key-mismatch",
  "idempotency-key-in-progress",
  "idempotency-key-lost",
  "idempotency-ledger-unavailable",
  "idempotency-ledger-error",
  "idempotency-response-too-large",
  "force-new-execution-not-allowed",
  "force-new-execution-invalid",
  "client-idempotency-id-invalid",
  "idempotency-fields-need-json",
  "idempotency-field-missing",
  "idempotency-field-empty",
  "json-number-out-of-range",
  "stored-payload-too-large",
  "client-idempotency-id-not-signed",
  "edge-condition-failed",
  "webhook-signature-missing",
  "webhook-signature-stale",
  "webhook-signature-version-unsupported",
  "webhook-signature-invalid",
  "webhook-secret-missing",
  "hook-not-found",
  "delivery-rejected",
  "delivery-unavailable",
  "step-not-failed",
  "invalid-query",
  "invalid-cursor",
  "invalid-retry-body",
  "destination-key-may-be-forgotten",
  "execution-running",
  "live-execution-exists",
  "execution-not-cancellable",
  "execution-cancelled",
  "execution-compensation",
  "execution-superseded",
  "invalid-cancel-body",
  "execution-not-retained",
  "execution-removed",
  "execution-chain-running",
  "execution-chain-too-long",
  "erasure-conflict",
  "archive-unbound",
  "execution-not-compensation-failed",
  "invalid-resolve-body",
  "secret-name-invalid",
  "secret-name-reserved",
  "secret-value-invalid",
  "secrets-master-key-missing",
  "notification-setting-invalid",
  "operator-token-required",
  "shards-misconfigured",
  "shard-schema-behind",
  "workspace-misplaced",
  "connector-invalid",
  "keyless-write-refused",
  "event-invalid",
  "event-source-not-found",
  "event-source-invalid",
  "event-extract-failed",
  "event-signature-missing",
  "event-signature-stale",
  "event-signature-invalid",
  "event-source-unavailable",
  "tokens-not-configured",
  "method-not-allowed",
  "query-parameter-unknown",
] as const satisfies readonly ProblemCode[];

type MissingProblemCode = Exclude<ProblemCode, (typeof PROBLEM_CODES)[number]>;
/** Compiles only while every catalog code is listed in PROBLEM_CODES. */
export const everyProblemCodeListed: [MissingProblemCode] extends [never] ? true : MissingProblemCode = true;

export const Problem = z
  .object({
    type: z.string().startsWith("urn:idemflow:problem:"),
    code: z.enum(PROBLEM_CODES).describe("stable: branch on it (docs/problems.md)"),
    title: z.string(),
    status: z.int().min(400).max(599),
    detail: z.string().optional(),
    errors: z
      .array(z.object({ pointer: z.string(), code: z.string(), message: z.string() }))
      .optional()
      .describe("invalid-definition: every error with its JSON Pointer"),
    fields: z.array(z.string()).optional().describe("idempotency-field-missing / -empty: the selected paths"),
    pointer: z.string().optional().describe("json-number-out-of-range, event-invalid: where the number or the member is"),
    number: z.string().optional().describe("json-number-out-of-range: the literal as sent"),
    member: z.string().optional().describe("event-extract-failed: the event source's member that failed (name, match, id, data)"),
    depth: Count.optional().describe("json-too-deep: how deeply the body nests arrays and objects"),
    maxDepth: Count.optional().describe("json-too-deep: the most accepted"),
    bodyBytes: Count.optional().describe("stored-payload-too-large: the body's size"),
    storedBytes: Count.optional().describe("stored-payload-too-large: the payload's size once stored as JSON (UTF-8)"),
    limitBytes: Count.optional().describe("stored-payload-too-large: the most a stored payload may take"),
    executionId: z.string().optional().describe("execution-not-retained / execution-removed: the execution"),
    reason: z
      .enum(["retention", "erased"])
      .optional()
      .describe("execution-not-retained / execution-removed: removed by the retention sweep, or erased on request"),
    removedAt: MaybeTime.optional().describe("execution-not-retained / execution-removed: when its rows were removed"),
    archived: z.boolean().optional().describe("execution-not-retained / execution-removed: whether its trace is in the archive"),
    tombstone: z
      .lazy(() => RemovedExecution)
      .optional()
      .describe("execution-not-retained: what its tombstone keeps (workflow, final status, when created, finished and removed)"),
    running: z.array(z.string()).optional().describe("execution-chain-running: the RUNNING members of the chain"),
    limit: Count.optional().describe("execution-chain-too-long: the most members one erasure takes"),
    unknown: z.array(z.string()).optional().describe("query-parameter-unknown: the query parameters the route does not read"),
    known: z.array(z.string()).optional().describe("query-parameter-unknown: the query parameters the route reads (possibly none)"),
    allowed: z.array(z.string()).optional().describe("method-not-allowed: the methods the path serves, as the `Allow` header lists them"),
  })
  .describe("RFC 9457 problem details (application/problem+json)");

// ---- health, demo --------------------------------------------------------------------------------

export const Health = z.object({ ok: z.literal(true), service: z.literal("idemflow") });

export const DemoOrder = z.object({
  id: z.string().startsWith("ord_"),
  workspace: z.string(),
  order: z.unknown().describe("the JSON body as sent"),
  createdAt: Time,
});

// ---- workflows (src/http/routes/workflows.ts) -----------------------------------------------------

export const SavedWorkflow = z.object({
  workflowId: z.string(),
  version: z.string().regex(/^[0-9a-f]{64}$/),
  created: z.boolean().describe("true: a new version (201); false: this definition was already the saved version (200)"),
  warnings: z
    .array(z.object({ pointer: z.string(), code: z.string(), message: z.string() }))
    .optional()
    .describe("saved, but said: a write with neither a destination key nor a verify probe (`write-without-key`, docs/connectors.md)"),
});

// ---- connectors (src/http/routes/connectors.ts) ---------------------------------------------------

export const SavedConnector = z.object({
  name: z.string(),
  version: z.string().regex(/^[0-9a-f]{64}$/),
  created: z.boolean().describe("true: a new version (201); false: this document was already the saved version (200)"),
});
export const StoredConnectorRead = z.object({
  name: z.string(),
  version: z.string().regex(/^[0-9a-f]{64}$/),
  createdAt: Time,
  definition: z.record(z.string(), z.unknown()).describe("the connector as saved (docs/connectors.md)"),
});
export const ConnectorList = z.object({ items: z.array(StoredConnectorRead) });

export const ScheduleRun = z.object({
  cron: z.string(),
  scheduledTime: Time,
  status: z.enum(["PENDING", "STARTING", "STARTED", "FAILED", "SKIPPED", "EXPIRED"]),
  attempts: Count,
  executionId: z.string().nullable(),
  error: z.string().nullable(),
  updatedAt: Time,
});

export const StoredWorkflowRead = z.object({
  workflowId: z.string(),
  version: z.string().regex(/^[0-9a-f]{64}$/),
  createdAt: Time,
  definition: WorkflowDefinition,
  scheduleRuns: z.array(ScheduleRun).optional().describe("the latest version of a scheduled workflow: its recent scheduled runs"),
});

export const WorkflowList = z.object({
  items: z.array(z.object({ workflowId: z.string(), latestVersion: z.string(), schedule: z.string().nullable(), updatedAt: Time })),
  next: z.string().nullable().describe("pass as `after` for the next page; null on the last page"),
});

// ---- starts (src/ingress/start.ts StartResult) ---------------------------------------------------

export const StartResult = z.object({
  executionId: z.string(),
  deduplicated: z.boolean().describe("true: this trigger was a duplicate of the execution named (200)"),
  identity: IdentityKind,
  status: ExecutionStatus,
});

export const StartOverResult = StartResult.extend({ startedOverFrom: z.string() });

// ---- traces and lists (src/steps/trace.ts) ----------------------------------------------------

export const DuplicatesStopped = z
  .object({ triggers: Count, redeliveries: Count, fencedOut: Count, destinationReplays: Count })
  .describe("where duplicates of this execution were stopped: the trigger dedupe, the claim, the fence, the destination's store");

export const ExecutionSummary = z.object({
  executionId: z.string(),
  workflowId: z.string(),
  version: z.string(),
  status: ExecutionStatus,
  trigger: TriggerKind,
  identity: IdentityKind,
  duplicateDeliveries: Count,
  lastDuplicateAt: MaybeTime,
  duplicatesStopped: DuplicatesStopped,
  maxAttempt: Count.describe("the most attempts any step of the execution needed (the list's `retried` filter: more than 1)"),
  startedOverFrom: z.string().nullable(),
  previousExecutionId: z.string().nullable(),
  supersededBy: z.string().nullable(),
  createdAt: MaybeTime,
  finishedAt: MaybeTime,
});

export const DestinationKey = z.object({
  value: z.string().nullable(),
  header: z.string().optional(),
  bodyField: z.string().optional(),
  profile: z.string().nullable(),
  maxLength: z.int(),
  alphabet: z.string(),
  retentionMs: z.number().nullable(),
  destination: z.string().nullable(),
  firstSentAt: MaybeTime,
  acknowledgedAt: MaybeTime,
  retentionDeadline: MaybeTime,
});

export const StepEvent = z.object({ type: z.string(), epoch: z.int().nullable(), at: MaybeTime, detail: z.string().nullable() });

export const Attempt = z.object({
  epoch: z.int(),
  attempt: z.int(),
  outcome: z
    .enum(["running", "completed", "failed", "retried", "in_progress", "lost", "cancelled", "slept"])
    .describe("`slept`: the attempt parked its step (a DELAY's sleep or a WAIT_FOR_EVENT's wait: the step's `wait` tells which)"),
  startedAt: MaybeTime,
  finishedAt: MaybeTime,
  durationMs: z.number().nullable(),
  idempotencyKey: z.string().nullable(),
  request: z.unknown().describe("the redacted request summary"),
  response: z
    .object({
      status: z.int(),
      headers: z.record(z.string(), z.string()).optional(),
      body: z.unknown().optional(),
      truncated: z.literal(true).optional(),
      bytes: z.int().optional(),
      preview: z.string().optional(),
    })
    .nullable(),
  error: z.string().nullable(),
  retryDelay: z.object({ ms: z.number(), reason: z.enum(["backoff", "retry-after", "in-progress"]), until: MaybeTime }).nullable(),
});

export const WaitEvent = z.object({
  eventId: z.string(),
  receivedAt: MaybeTime,
  source: z.string().nullable().describe("the event source it came through; null for POST /v1/events"),
  duplicates: Count.describe("deliveries of the same event after the first"),
  state: z
    .enum(["taken", "taken-elsewhere", "buffered", "expired"])
    .describe(
      "`taken`: this wait took it; `taken-elsewhere`: another wait did; else nobody: `buffered` until its buffer ends, then `expired`",
    ),
});

export const StepWait = z
  .object({
    event: z.string().describe("the event's name it waits for"),
    match: z.union([z.string(), z.number()]).nullable().describe("the correlation value; null before the wait registered"),
    consume: z.enum(["one", "all"]),
    registeredAt: MaybeTime.describe("when the wait registered (its first claim); null before that"),
    timeoutAt: MaybeTime.describe("when it times out; null before it registered"),
    timedOut: z.boolean(),
    decisions: z
      .array(z.string())
      .nullable()
      .describe("the decisions the definition offers a person (the inspector's buttons); null: none"),
    events: z.array(WaitEvent).max(20).describe("the events on its name and correlation value, newest first (at most 20)"),
  })
  .describe('a WAIT_FOR_EVENT step\'s wait and the events that arrived for it (docs/steps.md "The trace of a wait")');

export const PermitWait = z
  .object({
    connector: z.string(),
    since: MaybeTime.describe("when the step first asked (kept across its wake-ups)"),
    until: MaybeTime.describe("when it asks again (while waiting)"),
    grantedAt: MaybeTime.describe("when it got the permit; null while it waits"),
    reason: z.string().describe("why it waited: paused by a 429, no token, every permit in flight, older waiters first"),
    text: z.string().describe('"waiting for a permit of …" or "waited 4.2 s for …: …"'),
  })
  .describe('a wait for a connector\'s permit (docs/connectors.md "Limits"): not an attempt');

export const StepUndo = z
  .object({
    undoes: z.string().describe("the step it undoes"),
    state: z
      .enum(["PENDING", "DISPATCHED", "EXECUTING", "COMPLETED", "FAILED", "CANCELLED", "NOT_COMPENSATED"])
      .describe("the undo step's state; `NOT_COMPENSATED`: the compensation leaves this step as it is (`reason` says why)"),
    reason: z.string().nullable().describe("why the step is not compensated (no `compensate`, or it did not complete); else null"),
    rowKey: z.string().nullable().describe("`<vertex>#undo#<place>`: the undo's attempts and change-stream rows are under it"),
    place: z.int().nullable().describe("its place in the compensation's order (0 ran first: reverse order of completion)"),
    attempt: z.int(),
    epoch: z.int(),
    idempotencyKey: z.string().nullable().describe("the undo's own destination key (never the step's)"),
    request: z.unknown(),
    output: z.unknown(),
    outputOmitted: z.object({ bytes: Count, limit: Count }).nullable(),
    error: z.string().nullable(),
    availableAt: MaybeTime,
    createdAt: MaybeTime,
    finishedAt: MaybeTime,
    events: z.array(StepEvent),
    attempts: z.array(Attempt),
  })
  .describe('a step\'s undo once its execution compensates (docs/steps.md "Compensation")');

export const Compensation = z
  .object({
    order: z.array(z.string()).describe("the undone steps in the order their undo steps run (reverse order of completion)"),
    completed: Count,
    failed: Count,
    running: Count.describe("dispatched or executing"),
    pending: Count.describe("waiting for the undo before them (one at a time)"),
    cancelled: Count,
    resolution: z
      .object({
        resolvedBy: z.string(),
        note: z.string(),
        resolvedAt: MaybeTime,
        failedUndoOf: z.string().nullable().describe("the step whose undo had failed"),
      })
      .nullable()
      .describe("an operator marked the failed compensation resolved (POST …/compensation/resolve): who, the note, when; else null"),
  })
  .describe("the execution's compensation at a glance; null when it never compensated");

export const Step = z.object({
  vertexId: z.string(),
  state: StepState,
  attempt: z.int(),
  epoch: z.int(),
  leaseUntil: MaybeTime,
  parkedUntil: MaybeTime.describe("a parked step (a DELAY sleeping, a wait for an event): when it resumes on its own; null otherwise"),
  availableAt: MaybeTime,
  resends: Count,
  nextResendAt: MaybeTime,
  idempotencyKey: z.string().nullable(),
  destinationKey: DestinationKey.nullable(),
  request: z.unknown(),
  output: z.unknown(),
  outputOmitted: z
    .object({ bytes: Count, limit: Count })
    .nullable()
    .describe("the output's size when it is over `limit` bytes (64 KiB): too large for the trace, so `output` is null; else null"),
  nextVertices: z.array(z.string()).nullable(),
  wait: StepWait.nullable().describe("a WAIT_FOR_EVENT step's wait; null for every other step"),
  map: MapTrace.nullable().describe("a MAP step's items: counts by state and the first page; null for every other step"),
  permitWait: PermitWait.nullable().describe("a step through a limited connector that waited for a permit; null if it never did"),
  undo: StepUndo.nullable().describe("once the execution compensates: the step's undo step, or why it is not compensated; else null"),
  error: z.string().nullable(),
  createdAt: MaybeTime,
  finishedAt: MaybeTime,
  events: z.array(StepEvent),
  attempts: z.array(Attempt),
});

export const DuplicateTrigger = z.object({ seq: z.int(), at: MaybeTime, trigger: TriggerKind, identity: IdentityKind });

export const Trace = ExecutionSummary.extend({
  dedupeWindowEnd: MaybeTime.describe(
    "until when a trigger with the same identity is a duplicate of this execution; null for a forced start, and once the identity " +
      "row is swept or names another execution. A cancel with releaseIdentity shows as an end in the past",
  ),
  duplicateTriggers: z
    .array(DuplicateTrigger)
    .describe("each duplicate trigger the execution absorbed (the first 100; duplicatesStopped.triggers counts them all)"),
  compensation: Compensation.nullable(),
  steps: z.array(Step),
  archived: z
    .literal(true)
    .optional()
    .describe(
      "present (true) only on the trace of an execution the history sweep removed, read back from the archive: read-only " +
        "(retry, start over and cancel answer 410); the header Execution-Removed-At says when (docs/history-archive.md)",
    ),
});

/** `POST …/test-runs` with `Prefer: wait=N`: the trace, and whether the run was a duplicate. */
export const TestRunTrace = Trace.extend({ deduplicated: z.boolean() });

export const RemovedExecution = z
  .object({
    executionId: z.string(),
    workflowId: z.string(),
    status: ExecutionStatus,
    createdAt: MaybeTime,
    finishedAt: MaybeTime,
    removedAt: MaybeTime,
    reason: z.enum(["retention", "erased"]),
    archived: z.boolean().describe("true: `GET /v1/executions/{executionId}` answers its archived trace"),
  })
  .describe("an execution a search matched that the history sweep removed: what its tombstone keeps");

export const KeySend = z
  .object({
    key: z.string(),
    destination: z.string().describe("the origin it was sent to"),
    firstSentAt: MaybeTime,
    countedFrom: MaybeTime.describe("where the destination's retention counts from (an acknowledged retry moves it)"),
    executionId: z.string().describe("the execution whose step sent it there first"),
    vertexId: z.string(),
  })
  .describe("a destination key's first send to one destination");

export const ExecutionPage = z.object({
  items: z.array(ExecutionSummary),
  nextCursor: z.string().nullable().describe("pass as `cursor` for the next page; null on the last page"),
  removed: z
    .array(RemovedExecution)
    .optional()
    .describe("a search's matches on this page that the history sweep removed (from their tombstones); only with a search"),
  keys: z
    .array(KeySend)
    .optional()
    .describe("only with a search: the searched key's sends, or the keys the page's executions sent (at most 100)"),
});

// ---- operator actions (src/http/routes/executions.ts) -------------------------------------------

export const RetryAccepted = z.object({
  executionId: z.string(),
  vertexId: z.string(),
  state: z.literal("DISPATCHED"),
  acknowledgedForgottenKey: z.literal(true).optional(),
});

export const CancelResult = z.object({
  executionId: z.string(),
  status: z.enum(["CANCELLED", "COMPENSATING"]).describe("COMPENSATING: asked with `compensate: true` and a completed step is undone"),
  cancelledSteps: z
    .array(z.object({ vertexId: z.string(), state: z.enum(["DISPATCHED", "EXECUTING"]), idempotencyKey: z.string().nullable() }))
    .describe("the steps that were in flight and the key each had sent (a sent call cannot be unsent); empty when already cancelled"),
  identityReleased: z.boolean(),
});

export const ErasureResult = z
  .object({
    erased: z
      .array(z.string())
      .min(1)
      .describe("the executions erased: the one named and every member of its start-over / reuse chain (same trigger payload)"),
    archiveObjectsDeleted: Count.describe("archive objects (R2) deleted with them"),
    archive: z
      .literal("unbound")
      .optional()
      .describe("present when the deployment binds no ARCHIVE bucket: no archive object was looked for (archiveDetail says what remains)"),
    archiveDetail: z.string().optional().describe("with `archive`: what the erasure could not reach and how to reach it"),
  })
  .describe("DELETE /v1/executions/{id}: what was erased (docs/history-archive.md says what an erasure does not reach)");

// ---- stats (GET /v1/stats) -------------------------------------------------------------------------

const StatsCounts = z.object({ executions: Count, triggers: Count, redeliveries: Count, fencedOut: Count, destinationReplays: Count });

export const Stats = z.object({
  since: Time,
  workflows: z.array(StatsCounts.extend({ workflowId: z.string() })),
  total: StatsCounts,
  events: z
    .object({ received: Count, duplicates: Count })
    .describe("events the workspace received since `since` (POST /v1/events, event sources) and their duplicate deliveries"),
});

const StatsBucketCounts = StatsCounts.extend({
  byStatus: z
    .object({
      RUNNING: Count,
      COMPLETED: Count,
      FAILED: Count,
      CANCELLED: Count,
      COMPENSATING: Count,
      COMPENSATED: Count,
      COMPENSATION_FAILED: Count,
    })
    .describe(
      "the executions counted, by their status when last rolled up (or now, in the live part); the seven add up to `executions`. " +
        "The compensation statuses are counted apart in rolled-up hours too, except in an hour rolled before they had " +
        "columns (migrations/0037) and not re-rolled since: it counts COMPENSATING in RUNNING, " +
        "COMPENSATED and COMPENSATION_FAILED in FAILED",
    ),
  events: z
    .object({ received: Count, duplicates: Count })
    .nullable()
    .describe("the workspace's events received and their duplicate deliveries; null for one workflow (events are the workspace's)"),
});

export const StatsSeries = z
  .object({
    bucket: z.enum(["hour", "day"]),
    since: Time,
    until: Time,
    workflowId: z.string().nullable().describe("the workflow asked for; null: every workflow of the workspace"),
    rolledUpUntil: MaybeTime.describe("the hours before this come from the hourly rollup; null: it has not run yet"),
    liveSince: Time.describe("the hours from this on are computed live from the executions (the current hour, and any not rolled up)"),
    buckets: z
      .array(
        StatsBucketCounts.extend({
          start: Time,
          live: z.boolean().describe("some of the bucket's hours were computed live: its figures may still grow"),
        }),
      )
      .describe("every bucket of [since, until), oldest first, zeros included"),
    total: StatsBucketCounts,
  })
  .describe(
    "GET /v1/stats/series: duplicates stopped per boundary and executions by status, per bucket; an hour counts the executions " +
      'created in it (docs/history.md "The hourly rollup")',
  );

// ---- events and waits (src/http/routes/events.ts) -------------------------------------------------

export const EventAnswer = z.object({
  eventId: z.string().describe("the sender's id, or the one idemflow gave an event sent without one"),
  name: z.string(),
  match: z.union([z.string(), z.number()]),
  deduplicated: z.boolean().describe("true: an earlier delivery recorded this event; this answer is its outcome"),
  resumed: z.array(z.string()).describe("the executions whose waits the first delivery resumed"),
  buffered: z.boolean().describe("true: no wait took it at its first delivery; the first wait to start before `bufferedUntil` takes it"),
  bufferedUntil: Time,
  receivedAt: Time,
  duplicates: Count.describe("deliveries after the first"),
});

export const OpenWait = z.object({
  executionId: z.string(),
  vertexId: z.string(),
  workflowId: z.string(),
  name: z.string(),
  match: z.union([z.string(), z.number()]),
  consume: z.enum(["one", "all"]),
  registeredAt: Time,
  timeoutAt: Time,
});

export const WaitList = z.object({ event: z.string(), waits: z.array(OpenWait) });

// ---- event sources (src/http/routes/event-sources.ts) -----------------------------------------------

export const EventSource = z.object({
  name: z.string(),
  version: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .describe("SHA-256 of the definition's canonical JSON"),
  url: z.string().describe("the path the provider posts its webhooks to: /events/{workspace}/{name}"),
  definition: EventSourceDefinition,
  createdAt: Time,
  updatedAt: Time.describe("when the definition last changed (a PUT of the same definition leaves it)"),
});
export const EventSourceList = z.object({ items: z.array(EventSource) });

// ---- secrets (src/http/routes/secrets.ts) -----------------------------------------------------------

export const SecretListing = z.object({ name: z.string(), keyId: z.string(), createdAt: Time, updatedAt: Time });
export const SecretList = z.object({ items: z.array(SecretListing) });

// ---- operator (src/http/routes/operator.ts) ---------------------------------------------------------

const ShardStorage = z.object({
  shard: Count.describe("the shard's number (its place in D1_SHARDS)"),
  binding: z.string().describe("the shard's D1 binding"),
  sizeBytes: Count,
  limitBytes: Count,
  executionsRetained: Count,
  executionsCountedAt: Count.nullable(),
  bytesPerExecution: Count.nullable(),
  usedFraction: z.number().min(0),
});

export const StorageFigures = z
  .object({
    shards: z.array(ShardStorage).describe("every shard's figures, in shard order: each shard is its own database with its own limit"),
    sizeBytes: Count.describe("the database's size in bytes (D1's `meta.size_after`: its pages in use), every workspace, indexes included"),
    limitBytes: Count.describe("D1's maximum database size: 10 GB, read as 10^10 bytes"),
    executionsRetained: Count.describe("the rows of `executions` when the storage task last counted them (at most hourly)"),
    executionsCountedAt: Count.nullable().describe("when that count was taken (ms since the epoch); null before the first one"),
    bytesPerExecution: Count.nullable().describe("sizeBytes / executionsRetained, rounded; null with no execution"),
    usedFraction: z.number().min(0).describe("sizeBytes / limitBytes; at 0.8 and above the engine logs `storage.high`"),
    note: z.string().describe("how to read the size: production D1 reclaims deleted rows' space; locally the SQLite file never shrinks"),
  })
  .describe("shard 0's storage figures at the top level, every shard's in `shards`, for an operator token only");

/** The document itself (GET /v1/openapi.json): an OpenAPI 3.1 object. */
export const OpenApiDocument = z.object({ openapi: z.literal("3.1.0") }).catchall(z.unknown());
