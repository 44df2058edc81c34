/**
 * The problems of the executions API (src/http/routes/executions.ts): listing with a bad query,
 * an operator retry of a step that is not FAILED, with a body it does not take, or of a step the
 * retention guard refused without the acknowledgement it needs.
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";

export type ExecutionProblemCode =
  | "invalid-query"
  | "invalid-cursor"
  | "step-not-failed"
  | "invalid-retry-body"
  | "destination-key-may-be-forgotten"
  | "execution-running"
  | "live-execution-exists"
  | "execution-not-cancellable"
  | "execution-cancelled"
  | "invalid-cancel-body"
  | "execution-superseded";

/** Both list parameters share one code: a client fixes either the same way. */
const invalidQuery = (detail: string) => new ProblemError({ status: 400, code: "invalid-query", title: "Invalid query parameter", detail });

export const executionProblems = {
  invalidStatus: (allowed: readonly string[], given: string) =>
    invalidQuery(`status must be one of ${allowed.join(", ")}; got ${JSON.stringify(given)}.`),
  invalidLimit: () => invalidQuery("limit must be an integer from 1 to 100."),
  invalidTime: (name: string, given: string) =>
    invalidQuery(`${name} must be an ISO 8601 date-time such as 2026-12-03T10:00:00Z; got ${JSON.stringify(given.slice(0, 100))}.`),
  invalidParameter: (name: string, message: string) => invalidQuery(`${name}: ${message}.`),
  invalidFlag: (name: string, given: string) => invalidQuery(`${name} must be true or false; got ${JSON.stringify(given.slice(0, 100))}.`),
  invalidCursor: () =>
    new ProblemError({
      status: 400,
      code: "invalid-cursor",
      title: "Invalid cursor",
      detail: "Pass back the `nextCursor` value of a previous page unchanged, or omit `cursor` for the first page.",
    }),
  stepNotFailed: (ref: { executionId: string; vertexId: string }, state: string) =>
    new ProblemError({
      status: 409,
      code: "step-not-failed",
      title: "Only a FAILED step can be retried",
      detail:
        `Step ${ref.vertexId} is ${state}. Retry applies to FAILED steps; to run the whole execution again use POST ` +
        `/v1/executions/${ref.executionId}/start-over.`,
    }),
  retryBodyInvalid: (reason: string) =>
    new ProblemError({
      status: 400,
      code: "invalid-retry-body",
      title: "Invalid retry request",
      detail: `${reason}. A retry takes no body, or {"acknowledgeForgottenKey": true} for a step the retention guard refused.`,
    }),
  keyMayBeForgotten: (ref: { executionId: string; vertexId: string }) =>
    new ProblemError({
      status: 409,
      code: "destination-key-may-be-forgotten",
      title: "The destination may have forgotten this step's key",
      detail:
        `Step ${ref.vertexId} was not sent because its destination key is older than the destination remembers keys ` +
        `(the step's error says when it was first sent, where, and until when it was remembered). Re-sending it could be ` +
        `taken as a new request. Check by hand whether the first request took effect; if it did not, retry with the body ` +
        `{"acknowledgeForgottenKey": true} (recorded in the trace); if it did, leave the step FAILED.`,
    }),
  executionRunning: (executionId: string) =>
    new ProblemError({
      status: 409,
      code: "execution-running",
      title: "The execution is still running",
      detail:
        `Execution ${executionId} is RUNNING: a start over now would send its destination keys from two live executions at ` +
        `once. Wait for it to finish, or cancel it (POST /v1/executions/${executionId}/cancel), then start over.`,
    }),
  liveExecutionExists: (executionId: string, liveExecutionId: string) =>
    new ProblemError({
      status: 409,
      code: "live-execution-exists",
      title: "Another execution of this trigger is running",
      detail:
        `Execution ${liveExecutionId}, of the same lineage as ${executionId} (the same trigger, or a start over of it), ` +
        `is RUNNING: two live executions ` +
        `would send the same destination keys. Wait for it to finish, or cancel it (POST /v1/executions/${liveExecutionId}/cancel).`,
    }),
  executionNotCancellable: (executionId: string, status: string) =>
    new ProblemError({
      status: 409,
      code: "execution-not-cancellable",
      title: "Only a running execution can be cancelled",
      detail:
        `Execution ${executionId} is ${status}: nothing is left to stop. ` +
        `To run it again use POST /v1/executions/${executionId}/start-over.`,
    }),
  executionCancelled: (ref: { executionId: string; vertexId: string }) =>
    new ProblemError({
      status: 409,
      code: "execution-cancelled",
      title: "The execution was cancelled",
      detail:
        `Execution ${ref.executionId} was cancelled, so its step ${ref.vertexId} is not retried (a cancel is a decision). To run ` +
        `it again use POST /v1/executions/${ref.executionId}/start-over.`,
    }),
  cancelBodyInvalid: (reason: string) =>
    new ProblemError({
      status: 400,
      code: "invalid-cancel-body",
      title: "Invalid cancel request",
      detail: `${reason}. A cancel takes no body, or {"releaseIdentity": true} to let the next trigger with its identity start anew.`,
    }),
  executionSuperseded: (executionId: string, supersededBy: string) =>
    new ProblemError({
      status: 409,
      code: "execution-superseded",
      title: "A newer execution took this execution's trigger",
      detail:
        `Execution ${executionId} failed, and a later trigger with its identity started ${supersededBy} (the entry point's ` +
        `reusePolicy is after-failure). Act on ${supersededBy} instead: retrying or starting over ${executionId} would send ` +
        `the same destination keys beside it.`,
    }),
} satisfies ProblemCatalog<ExecutionProblemCode>;
