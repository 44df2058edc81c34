/**
 * The problems of the executions API (src/http/routes/executions.ts): listing with a bad query,
 * and an operator retry of a step that is not FAILED.
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";

export type ExecutionProblemCode = "invalid-query" | "invalid-cursor" | "step-not-failed";

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
} satisfies ProblemCatalog<ExecutionProblemCode>;
