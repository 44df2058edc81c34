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
  | { kind: "retryable"; error: string; retryAfterMs?: number; request?: RequestSummary; output?: unknown };
