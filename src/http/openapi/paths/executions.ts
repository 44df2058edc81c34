/**
 * The OpenAPI operations of the `executions` area: traces, lists, operator actions, erasure and the
 * stats of duplicates stopped (src/http/routes/executions.ts, stats.ts).
 */
import { area, AUTH, eventStream, json, keyedAction, merge, op } from "../operation";
import * as req from "../requests";
import * as res from "../responses";
import { MAP_ITEM_OPERATIONS } from "../map-items";
import { COMPENSATION_OPERATIONS } from "../compensation";

/** Both stats reads refuse a bad query the same way. */
const STATS_PROBLEMS = merge(AUTH, { 400: ["invalid-query"] });

export const EXECUTION_OPERATIONS = area("executions", [
  op("get", "/v1/executions", "listExecutions", {
    summary: "List executions, newest first, with filters and a cursor; or search them by a business id or a destination key",
    query: req.ExecutionListQuery,
    answers: { 200: json("a page of executions", res.ExecutionPage) },
    problems: merge(AUTH, { 400: ["invalid-query", "invalid-cursor"] }),
  }),
  op("get", "/v1/executions/{executionId}", "readTrace", {
    summary: "The trace: every step, its attempts, events and keys (of a swept execution: its archived trace)",
    answers: {
      200: json(
        "the trace; for an execution the history sweep removed, the trace it archived, with `archived: true` (docs/history-archive.md)",
        res.Trace,
        ["execution-removed-at"],
      ),
    },
    problems: merge(AUTH, { 404: ["not-found", "execution-not-retained"] }),
  }),
  op("delete", "/v1/executions/{executionId}", "eraseExecution", {
    summary: "Erase a finished execution (and its start-over / reuse chain) from the database and the archive",
    ...keyedAction(
      null,
      { 200: json("erased (or, for an execution already swept, its archived trace deleted)", res.ErasureResult, ["idempotent-replayed"]) },
      { 404: ["not-found"], 409: ["execution-chain-running", "execution-chain-too-long", "erasure-conflict"], 503: ["archive-unbound"] },
    ),
  }),
  op("get", "/v1/executions/{executionId}/events", "executionEvents", {
    summary: "The execution's changes as server-sent events, resumable with Last-Event-ID (docs/events.md)",
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
      200: eventStream(
        "`text/event-stream` of `attempt` and `step.event`; ends with `execution.finished` (final) " +
          "or `stream.end` (the per-connection bound: reconnect with Last-Event-ID)",
      ),
    },
    problems: merge(AUTH, { 400: ["invalid-query", "invalid-cursor"], 404: ["not-found"], 410: ["execution-removed"] }),
  }),
  op("post", "/v1/executions/{executionId}/steps/{vertexId}/retry", "retryStep", {
    summary: "Operator retry of a FAILED step, with the same persisted key",
    ...keyedAction(
      { schema: req.RetryBody, invalid: "invalid-retry-body" },
      { 202: json("the step is DISPATCHED again", res.RetryAccepted, ["idempotent-replayed"]) },
      {
        404: ["not-found"],
        409: [
          "step-not-failed",
          "destination-key-may-be-forgotten",
          "execution-cancelled",
          "execution-compensation",
          "live-execution-exists",
          "execution-superseded",
        ],
        410: ["execution-removed"],
      },
    ),
  }),
  op("post", "/v1/executions/{executionId}/start-over", "startOver", {
    summary: "A new execution from the same trigger, pinned to the same version, linked to this one",
    ...keyedAction(
      null,
      { 202: json("the new execution started", res.StartOverResult, ["idempotent-replayed"]) },
      {
        404: ["not-found"],
        409: ["execution-running", "live-execution-exists", "execution-superseded"],
        410: ["execution-removed"],
        422: ["json-number-out-of-range", "edge-condition-failed"],
      },
    ),
  }),
  op("post", "/v1/executions/{executionId}/cancel", "cancel", {
    summary: "Cancel: the execution and its in-flight steps become CANCELLED at once",
    ...keyedAction(
      { schema: req.CancelBody, invalid: "invalid-cancel-body" },
      { 200: json("cancelled now, or already cancelled", res.CancelResult, ["idempotent-replayed"]) },
      { 404: ["not-found"], 409: ["execution-not-cancellable"], 410: ["execution-removed"] },
    ),
  }),
  op("get", "/v1/stats", "stats", {
    summary: "Duplicates stopped, per workflow of the workspace",
    query: req.StatsQuery,
    answers: { 200: json("the sums per workflow and in total", res.Stats) },
    problems: STATS_PROBLEMS,
  }),
  op("get", "/v1/stats/series", "statsSeries", {
    summary: "Duplicates stopped per boundary and executions by status, per hour or day, from the hourly rollup",
    query: req.StatsSeriesQuery,
    answers: { 200: json("every bucket of the range, and the total", res.StatsSeries) },
    problems: STATS_PROBLEMS,
  }),
  // A MAP step's items after the trace's first page (../map-items.ts).
  ...MAP_ITEM_OPERATIONS,
  // The operator's actions on a failed compensation (../compensation.ts).
  ...COMPENSATION_OPERATIONS,
]);
