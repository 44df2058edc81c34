/**
 * The problems of the executions API (src/http/routes/executions.ts): listing with a bad query,
 * an operator retry of a step that is not FAILED, with a body it does not take, or of a step the
 * retention guard refused without the acknowledgement it needs; an execution the history sweep
 * removed (SPEC section 12), and an erasure (`DELETE`) that cannot go ahead.
 */
import { isoTime, isoTimeText } from "../lib/iso-time";
import { ProblemError, type ProblemCatalog } from "../lib/problem";
import type { FinalExecutionStatus } from "../ledger/execution-types";

/** What is left of a removed execution that a problem explains (src/ledger/history.ts `Tombstone`). */
export interface RemovedExecution {
  id: string;
  reason: "retention" | "erased";
  removedAt: number;
  archived: boolean;
  /** The rest of the tombstone, when read whole (src/ledger/history.ts `readTombstone`): the 404's `tombstone`. */
  workflowId?: string;
  status?: FinalExecutionStatus;
  createdAt?: number;
  finishedAt?: number;
}

/** What the tombstone keeps, as the answer shows it (the schema's `RemovedExecution`). */
const tombstoneOf = (t: RemovedExecution) =>
  t.workflowId === undefined
    ? {}
    : {
        tombstone: {
          executionId: t.id,
          workflowId: t.workflowId,
          status: t.status,
          createdAt: isoTime(t.createdAt ?? null),
          finishedAt: isoTime(t.finishedAt ?? null),
          removedAt: isoTime(t.removedAt),
          reason: t.reason,
          archived: t.archived,
        },
      };

/** "removed by retention on <date>" / "erased on request on <date>". */
const removal = (t: RemovedExecution): string =>
  t.reason === "erased"
    ? `was erased on request on ${isoTimeText(t.removedAt)}`
    : `was removed by retention on ${isoTimeText(t.removedAt)}`;

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
  | "execution-compensation"
  | "invalid-cancel-body"
  | "execution-superseded"
  | "execution-not-retained"
  | "execution-removed"
  | "execution-chain-running"
  | "execution-chain-too-long"
  | "erasure-conflict"
  | "archive-unbound"
  | "execution-not-compensation-failed"
  | "invalid-resolve-body";

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
  executionCompensation: (ref: { executionId: string; vertexId: string }, status: string) =>
    new ProblemError({
      status: 409,
      code: "execution-compensation",
      title: "The execution's failure is being compensated",
      detail:
        `Execution ${ref.executionId} is ${status}: its completed steps are undone (or were), so its step ${ref.vertexId} is ` +
        `not retried (docs/steps.md "Compensation"). To run the order again, start it over (a compensated step's key is burnt).`,
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
  /** `GET /v1/executions/{id}` of an execution whose rows are gone and whose trace is not in the archive. */
  executionNotRetained: (t: RemovedExecution, why: "not-archived" | "object-missing" | "archive-unbound") =>
    new ProblemError({
      status: 404,
      code: "execution-not-retained",
      title: "The execution is no longer retained",
      detail:
        `Execution ${t.id} ${removal(t)}` +
        (t.reason === "erased"
          ? ": its trace was deleted with it."
          : why === "not-archived"
            ? ", and its trace was not archived (the archive is off: HISTORY_ARCHIVE, or no ARCHIVE bucket bound)."
            : why === "archive-unbound"
              ? "; its trace is in the archive, but this deployment has no ARCHIVE bucket bound to read it from."
              : "; its trace was archived, but the archive object is missing.") +
        " See docs/history.md for the retention that applied.",
      extensions: { executionId: t.id, reason: t.reason, removedAt: isoTime(t.removedAt), archived: t.archived, ...tombstoneOf(t) },
    }),
  /** Retry, start over or cancel (or the event stream) of a removed execution: it is read-only. */
  executionRemoved: (t: RemovedExecution) =>
    new ProblemError({
      status: 410,
      code: "execution-removed",
      title: "The execution was removed: it is read-only",
      detail:
        `Execution ${t.id} ${removal(t)}; its rows are gone, so it cannot be retried, started over, cancelled or followed. ` +
        (t.archived
          ? `Its archived trace is read with GET /v1/executions/${t.id}. To run the same trigger again, send the trigger again.`
          : "To run the same trigger again, send the trigger again."),
      extensions: { executionId: t.id, reason: t.reason, removedAt: isoTime(t.removedAt), archived: t.archived },
    }),
  /** `DELETE` of an execution whose start-over or reuse chain has a RUNNING member. */
  executionChainRunning: (executionId: string, running: readonly string[]) =>
    new ProblemError({
      status: 409,
      code: "execution-chain-running",
      title: "An execution of this chain is still running",
      detail:
        `Erasing execution ${executionId} erases its whole chain (its start overs and reuses after failure, which carry the same ` +
        `trigger payload), and ${running.join(", ")} ${running.length === 1 ? "is" : "are"} RUNNING. Wait for ` +
        `${running.length === 1 ? "it" : "them"} to finish, or cancel (POST /v1/executions/{id}/cancel), then erase. Nothing was erased.`,
      extensions: { running: [...running] },
    }),
  /** `DELETE` of an execution whose chain is longer than one erasure takes. */
  executionChainTooLong: (executionId: string, limit: number) =>
    new ProblemError({
      status: 409,
      code: "execution-chain-too-long",
      title: "The execution's chain is too long to erase at once",
      detail:
        `Execution ${executionId} belongs to a chain of start overs and reuses after failure with more than ${limit} members: one ` +
        "erasure removes a whole chain in one transaction, and this one is over the bound. Nothing was erased; the operator can " +
        "remove it by hand (docs/history-archive.md).",
      extensions: { limit },
    }),
  /** `DELETE` whose chain kept changing under it (an operator retried or started over a member meanwhile). */
  erasureConflict: (executionId: string) =>
    new ProblemError({
      status: 409,
      code: "erasure-conflict",
      title: "The execution changed while it was being erased",
      detail:
        `Execution ${executionId}'s chain changed while it was being erased (a member was retried, started over or swept at the same ` +
        "time). Nothing was erased. Send the same request again with the same Idempotency-Key.",
      headers: { "retry-after": "1" },
    }),
  /** `DELETE` of an archived execution while no ARCHIVE bucket is bound: its object cannot be deleted. */
  archiveUnbound: (executionId: string) =>
    new ProblemError({
      status: 503,
      code: "archive-unbound",
      title: "The archive is not bound",
      detail:
        `Execution ${executionId}'s trace is in the archive, but this deployment has no ARCHIVE bucket bound, so it cannot be ` +
        "deleted from there. Nothing was erased. Operator: bind the R2 bucket as ARCHIVE (wrangler.toml) and erase again.",
    }),
  /** An operator retry or "mark resolved" of a compensation that did not fail (docs/steps.md "Compensation"). */
  executionNotCompensationFailed: (executionId: string, status: string, action: "retry" | "resolve") =>
    new ProblemError({
      status: 409,
      code: "execution-not-compensation-failed",
      title: "The execution's compensation did not fail",
      detail:
        `Execution ${executionId} is ${status}: only a COMPENSATION_FAILED execution's failed undo can be ` +
        `${action === "retry" ? "retried" : "marked resolved"}. Nothing changed. ` +
        (status === "COMPENSATING"
          ? "Its undo steps are running: wait for it to end."
          : `Read its trace (GET /v1/executions/${executionId}) for what happened (docs/steps.md "Compensation").`),
    }),
  resolveBodyInvalid: (reason: string) =>
    new ProblemError({
      status: 400,
      code: "invalid-resolve-body",
      title: "Invalid resolve request",
      detail:
        `${reason}. A resolve takes {"note": "<what was done by hand, 1 to 2000 characters>"} and optionally ` +
        `{"resolvedBy": "<who, 1 to 200 characters>"}.`,
    }),
} satisfies ProblemCatalog<ExecutionProblemCode>;
