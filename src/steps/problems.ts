/**
 * The problems of the executions API (src/http/routes/executions.ts): listing with a bad query,
 * an operator retry of a step that is not FAILED, with a body it does not take, or of a step the
 * retention guard refused without the acknowledgement it needs.
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";

export type ExecutionProblemCode =
  "invalid-query" | "invalid-cursor" | "step-not-failed" | "invalid-retry-body" | "destination-key-may-be-forgotten";

/** Both list parameters share one code: a client fixes either the same way. */
const invalidQuery = (detail: string) => new ProblemError({ status: 400, code: "invalid-query", title: "Invalid query parameter", detail });

export const executionProblems = {
  invalidStatus: (allowed: readonly string[], given: string) =>
    invalidQuery(`status must be one of ${allowed.join(", ")}; got ${JSON.stringify(given)}.`),
  invalidLimit: () => invalidQuery("limit must be an integer from 1 to 100."),
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
} satisfies ProblemCatalog<ExecutionProblemCode>;
