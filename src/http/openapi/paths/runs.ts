/**
 * The OpenAPI operations of the `runs` area: starting executions — production triggers, test runs,
 * streams, signed webhooks (src/http/routes/triggers.ts, hooks.ts).
 */
import { z } from "zod";
import { area, AUTH, eventStream, GUARDED, idempotencyKey, json, merge, op, PUBLIC_DELIVERY, START, startAnswers } from "../operation";
import * as req from "../requests";
import * as res from "../responses";

/** A test run's answers: the trace with `Prefer: wait`, else what a start answers. */
const testRunAnswer = z.union([res.StartResult, res.TestRunTrace]);

export const RUN_OPERATIONS = area("runs", [
  op("post", "/v1/workflows/{workflowId}/trigger", "trigger", {
    summary: "Production trigger: always deduplicated on its identity",
    query: req.TriggerQuery,
    // A test run's `forceNewExecution` on a production trigger: 400 force-new-execution-not-allowed.
    refusedQuery: Object.keys(req.TestRunQuery.shape),
    headers: [idempotencyKey(false)],
    body: { schema: req.TriggerPayload, required: true, description: "the payload (JSON, or any bytes when the identity is its content)" },
    answers: startAnswers("executionId", res.StartResult),
    problems: merge(AUTH, GUARDED, START),
  }),
  op("post", "/v1/workflows/{workflowId}/test-runs", "testRun", {
    summary: "Test run (a new execution each time by default); `Prefer: wait=N` answers the trace",
    query: req.TestRunQuery,
    headers: [
      { name: "Prefer", required: false, description: "`wait=N`: wait up to N seconds and answer the trace", schema: { type: "string" } },
    ],
    body: { schema: req.TriggerPayload, required: true, description: "the payload" },
    answers: {
      200: json("with `Prefer: wait`: the finished trace; without: a duplicate's StartResult", testRunAnswer, ["location"]),
      202: json("without `Prefer: wait`: started; with it: the trace so far, still running", testRunAnswer, ["location"]),
    },
    problems: merge(AUTH, START, { 400: ["force-new-execution-invalid"] }),
  }),
  op("post", "/v1/workflows/{workflowId}/stream", "streamRun", {
    summary: "Test run streamed as server-sent events until it ends, or until its bound (then continue on GET …/events)",
    query: req.TestRunQuery,
    body: { schema: req.TriggerPayload, required: true, description: "the payload" },
    answers: {
      200: eventStream("a duplicate: the events of the existing execution"),
      202: eventStream(
        "a new execution: its events; ends with `execution.finished`, or with `stream.timeout` after 240 polls or 60 s " +
          "while it still runs — every id is a position of GET /v1/executions/{executionId}/events: continue there with Last-Event-ID",
      ),
    },
    problems: merge(AUTH, START, { 400: ["force-new-execution-invalid"] }),
  }),
  op("post", "/hooks/{workspaceId}/{workflowId}", "signedHook", {
    summary: "Public webhook of an entry point with `webhook.signature` (the signature authenticates)",
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
    answers: startAnswers("executionId", res.StartResult),
    // One answer for an unknown workspace or workflow and every signature refusal.
    problems: merge(START, { 400: ["client-idempotency-id-not-signed"] }, PUBLIC_DELIVERY),
  }),
]);
