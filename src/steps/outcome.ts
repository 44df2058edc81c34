/** What running a vertex produced, before the consumer turns it into a step transition. */

/** The recorded request: redacted, bounded. */
export interface RequestSummary {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: unknown;
}

export type RunOutcome =
  | { kind: "completed"; output: unknown; request?: RequestSummary }
  /** Will fail the same way again: not retried. */
  | { kind: "failed"; error: string; request?: RequestSummary; output?: unknown }
  /** Transient: retried while the vertex's retry budget lasts. */
  | { kind: "retryable"; error: string; retryAfterMs?: number; request?: RequestSummary; output?: unknown }
  /**
   * The destination says a request with this step's key is still running there (an earlier
   * attempt of this very step): not a failure — ask again later, within the in-progress budget.
   */
  | { kind: "in_progress"; error: string; retryAfterMs?: number; request?: RequestSummary; output?: unknown };
