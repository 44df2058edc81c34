/** What running a vertex produced, before the consumer turns it into a step transition. */
import type { PermitWait } from "../ledger/connector-permits";
import type { MapPark } from "../ledger";

/**
 * The largest step output (UTF-8 bytes of its JSON) stored on the step row. D1 refuses rows over
 * 2 MB, and a settle batch D1 refuses would crash the worker on every attempt; over the bound the
 * step fails loudly instead (a Gateway response is already bounded by `maxResponseBytes` ≤ 1 MiB).
 */
export const MAX_OUTPUT_BYTES = 1_500_000;

/** The recorded request: redacted, bounded. */
export interface RequestSummary {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: unknown;
}

/** What the destination answered, as the attempt's record keeps it: allowlisted headers, secrets scrubbed. */
export interface ResponseSummary {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** What every outcome of a call may carry for the record: the request sent and the answer got. */
interface Recorded {
  request?: RequestSummary;
  response?: ResponseSummary;
}

export type RunOutcome =
  | ({ kind: "completed"; output: unknown } & Recorded)
  /** Will fail the same way again: not retried. */
  | ({ kind: "failed"; error: string; output?: unknown } & Recorded)
  /** Transient: retried while the vertex's retry budget lasts. */
  | ({ kind: "retryable"; error: string; retryAfterMs?: number; output?: unknown } & Recorded)
  /**
   * The destination says a request with this step's key is still running there (an earlier
   * attempt of this very step): not a failure — ask again later, within the in-progress budget.
   */
  | ({ kind: "in_progress"; error: string; retryAfterMs?: number; output?: unknown } & Recorded)
  /**
   * A DELAY whose time has not come (src/steps/delay.ts), or a WAIT_FOR_EVENT with no event yet
   * (src/steps/wait-for-event.ts, `waitKey` its registration): the step parks until `until`.
   */
  | {
      kind: "parked";
      until: number;
      detail: string;
      waitKey?: string;
      /** A MAP waiting for its items (src/steps/map.ts): it parks only while one is unsettled. */
      mapItems?: MapPark;
      output?: undefined;
      request?: undefined;
      response?: undefined;
    }
  /**
   * A Gateway step through a limited connector found no permit (src/flow/permits.ts): it parks until
   * `until` without it being an attempt — nothing was sent, nothing is counted.
   */
  | {
      kind: "awaiting_permit";
      until: number;
      detail: string;
      wait: PermitWait;
      output?: undefined;
      request?: undefined;
      response?: undefined;
    };

/** What a call can end in (a Gateway step, its verify probe): every outcome but parking. */
export type CallOutcome = Exclude<RunOutcome, { kind: "parked" } | { kind: "awaiting_permit" }>;
