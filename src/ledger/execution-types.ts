/**
 * The shapes of an execution and of its start: what a new execution is, how it starts (a claim of
 * its trigger's identity, or forced), what the start batch answers, and the one error it throws.
 * ./executions.ts runs the start; the statements it batches live in ./identity-claim.ts,
 * ./start-source.ts, ./start-execution-row.ts and ./start-steps.ts.
 */
import type { ChainedClaim } from "./chain-claim";

export type TriggerKind = "webhook" | "test" | "stream" | "schedule" | "start_over";
export type IdentityKind = "content" | "fields" | "client" | "schedule" | "forced";
export type ExecutionStatus = "RUNNING" | "COMPLETED" | "FAILED" | "CANCELLED" | "COMPENSATING" | "COMPENSATED" | "COMPENSATION_FAILED";

/**
 * The live statuses, as SQL: RUNNING, and COMPENSATING (its undo steps run: docs/steps.md
 * "Compensation"). The one-live gate of a lineage counts both; the partial index
 * `executions_live_by_lineage` (migrations/0031) has this very predicate.
 */
/** How an execution ended: the statuses a tombstone can hold. */
export type FinalExecutionStatus = Exclude<ExecutionStatus, "RUNNING" | "COMPENSATING">;

export const LIVE_STATUSES_SQL = "('RUNNING', 'COMPENSATING')";

/** What the new execution is; the same whoever wins. */
export interface NewExecution {
  workspace: string;
  workflowId: string;
  version: string;
  entryVertexId: string;
  triggerKind: TriggerKind;
  identityKind: IdentityKind;
  /** The trigger payload as JSON text; also the entry step's output. */
  payloadJson: string;
  startedOverFrom?: string | null;
  /**
   * Start only if `version` is still the workflow's latest (checked inside the batch). Set when
   * the caller took the definition from a cache instead of reading it: a miss writes nothing and
   * `startExecution` throws `WorkflowVersionChanged`, so the caller re-reads and retries.
   */
  requireLatestVersion?: boolean;
  /**
   * How long the execution is kept once finished, by how it ended (src/history/retention.ts: the
   * workflow's `history`, else the deployment's, never shorter than the dedupe window).
   */
  retention: ExecutionRetention;
}

/** Retention in ms per final status (migrations/0017: at least one minute each). */
export interface ExecutionRetention {
  completedMs: number;
  failedMs: number;
  cancelledMs: number;
}

/** The start was gated on a version that is no longer the workflow's latest; nothing was written. */
export class WorkflowVersionChanged extends Error {
  constructor(
    readonly workspace: string,
    readonly workflowId: string,
    readonly version: string,
  ) {
    super(`workflow ${workspace}/${workflowId} is no longer at version ${version}`);
    this.name = "WorkflowVersionChanged";
  }
}

/** The entry's successors as planned by `planReadySteps` (src/steps/plan.ts). */
export interface StartPlan {
  steps: ReadonlyArray<{ vertexId: string; state: "DISPATCHED" | "SKIPPED" }>;
  /**
   * The successors whose edges the entry takes: stored on the execution row (`entry_next`,
   * migrations/0045: the entry step has no row), which the steps' fan-in decision reads (./entry-step.ts).
   */
  entryNext: readonly string[];
}

export type StartMode =
  /** Test/stream runs and start-over: no identity, an id chosen by the caller. */
  | { mode: "forced"; executionId: string; plan: StartPlan }
  | {
      mode: "claim";
      identity: string;
      /** Random per request: the row holding it after the claim names the winner. */
      claimToken: string;
      /**
       * The new window's execution id (src/ingress/identity.ts `windowExecutionId`: the identity
       * and the window's start, `now`). No run's id is the bare identity: an id is never given twice.
       */
      executionId: string;
      /**
       * The id used instead when an execution row or a tombstone already holds `executionId` (a
       * clock that stepped back): derived from the identity, `now` and the claim token.
       */
      alternateExecutionId: string;
      expiresAt: number;
      /** Plans for each candidate id (edges may read `execution.id`, so they can differ). */
      plans: { first: StartPlan; alternate: StartPlan };
      /**
       * The entry point's `reusePolicy` is `after-failure`: an identity that names a FAILED
       * execution (not superseded, nothing of its lineage live) is taken over like an expired one.
       */
      reuseAfterFailure?: boolean;
      /**
       * The hashes of the identity's business values (src/ingress/identity-values.ts), indexed for
       * the search by business id (carried by the claim, written by the execution insert's trigger: migrations/0024).
       */
      identityValues?: readonly string[];
    };

export type StartOutcome =
  | {
      created: true;
      executionId: string;
      status: ExecutionStatus;
      plan: StartPlan;
      /** The first step the batch claimed for the caller to run (`startExecution`'s `chain`), if any. */
      chained: ChainedClaim | null;
      /** With a chained claim: the workspace's sealed secrets the definition names (as `StepRun.sealedSecretsJson`). */
      sealedSecretsJson: string | null;
    }
  /**
   * A start over the gate refused (`startOverGate`), nothing written: the execution it would start
   * over is not finished (`fromStatus`, null when it is not in this workspace) or another
   * execution of its lineage is live (`liveExecutionId`).
   */
  | { created: false; refused: true; fromStatus: ExecutionStatus | null; liveExecutionId: string | null; supersededBy: string | null }
  | {
      created: false;
      executionId: string;
      status: ExecutionStatus;
      duplicateDeliveries: number;
      lastDuplicateAt: number;
    };
