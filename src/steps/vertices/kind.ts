/**
 * What every vertex type is to the step engine: how it executes and what outcome it returns, and
 * which retry policy its transient failures meet. One module per type (./gateway.ts,
 * ./transform.ts, ./delay.ts, ./wait-for-event.ts, ./entry-point.ts) and one table of them
 * (./index.ts), so src/steps/run-step.ts stays claim → execute → decide → apply, with no branch per
 * type. The save-time side of each type (its schema and rules) is in src/definitions.
 */
import type { RetryPolicy, Vertex } from "../../definitions/schema";
import type { ClaimedStep, Fence, StepRun } from "../../ledger";
import type { RunOutcome } from "../outcome";
import type { ExpressionContext } from "../plan";
import type { StepRuntime } from "../runtime";

/** What a vertex runs with: the runtime, the claimed step and its execution, the expression context. */
export interface VertexRun {
  rt: StepRuntime;
  run: StepRun;
  claimed: ClaimedStep;
  fence: Fence;
  /** The lease this claim holds (the step lease, or a chained claim's): a heartbeat extends by it. */
  leaseMs: number;
  context: ExpressionContext;
}

export interface VertexKind<V extends Vertex> {
  /** Run the vertex once for this claim. A throw is a crash: the step stays EXECUTING under its lease. */
  execute(vertex: V, r: VertexRun): Promise<RunOutcome>;
  /** The policy of its transient failures (`retryable` outcomes); null: never retried. */
  retryPolicy(vertex: V): RetryPolicy | null;
}

/** A vertex type with no transient failures of its own. */
export const NEVER_RETRIED = (): null => null;
