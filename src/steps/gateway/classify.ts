/**
 * Phase 6 of a Gateway attempt: what the send's result means for the step. Pure.
 *
 * 2xx completes; a 409 saying this key's earlier request is still in progress waits
 * (`in_progress`, before any 409 rule); 409 completes when `conflictAsProcessed`; 408, 429 and
 * 5xx, network errors and timeouts are retryable (`Retry-After` passed on for the retry policy to
 * honour up to its ceiling); a response over `maxResponseBytes` fails; any other status fails
 * unless `clientErrorMode` is `complete`, in which case the response becomes the output for edges.
 */
import type { GatewayVertex } from "../../definitions/schema";
import { errorMessage } from "../../lib/log";
import { allowlistedHeaders, parseBody } from "../http-response";
import type { CallOutcome, RequestSummary, ResponseSummary } from "../outcome";
import { isRetryableStatus, parseRetryAfter } from "../retry-policy";
import { scrubDeep, scrubSecrets } from "../secrets";
import type { SendResult } from "./send";

/**
 * The `code` of idemflow's own Idempotency-Key middleware's in-progress problem
 * (src/http/idempotency/problems.ts; a test keeps them equal — steps do not import the http layer).
 */
export const IN_PROGRESS_PROBLEM_CODE = "idempotency-key-in-progress";

/** What classifying needs to know about the attempt besides the send's result. */
export interface Attempt {
  method: string;
  url: URL;
  /** The recorded request, attached to every outcome. */
  request: RequestSummary;
  /** The destination key sent, if any: part of the output. */
  key: string | undefined;
  /** The secret values sent: scrubbed from everything recorded from the response. */
  secretValues: readonly string[];
  config: Pick<GatewayVertex["config"], "conflictAsProcessed" | "clientErrorMode">;
}

type Failure = Exclude<SendResult, { kind: "answered" }>;

/** No answer: a body over the bound fails (it would be as large again); the rest is transient. */
export function classifySendFailure(failure: Failure, attempt: Attempt): CallOutcome {
  const { request } = attempt;
  if (failure.kind === "too_large") return { kind: "failed", request, error: failure.error.message };
  const why =
    failure.kind === "timed_out"
      ? `timed out after ${failure.timeoutMs} ms`
      : `network error: ${scrubSecrets(errorMessage(failure.error), attempt.secretValues)}`;
  return { kind: "retryable", request, error: `${endpoint(attempt)}: ${why}` };
}

/** An answer. `now` dates an HTTP-date `Retry-After`. */
export function classifyResponse(answer: { response: Response; text: string }, attempt: Attempt, now: number): CallOutcome {
  const { response } = answer;
  const { request, config } = attempt;
  // Anything recorded from the response is scrubbed of the secrets just sent.
  const output = scrubDeep(
    {
      status: response.status,
      headers: allowlistedHeaders(response.headers),
      body: parseBody(answer.text, response.headers.get("content-type")),
      idempotencyKey: attempt.key ?? null,
    },
    attempt.secretValues,
  ) as ResponseSummary & { idempotencyKey: string | null };
  const status = response.status;
  const what = `${endpoint(attempt)} answered ${status}`;
  const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"), now);
  // Every outcome below carries the request and the answer for the attempt's record.
  const recorded = { output, request, response: { status, headers: output.headers, body: output.body } };
  if (status >= 200 && status < 300) return { kind: "completed", ...recorded };
  // Before the 409 rules: "in progress" is neither "already processed" nor an answer to route on.
  if (isInProgress(status, retryAfterMs, output.body)) {
    const after = retryAfterMs === undefined ? "" : ` (Retry-After ${Math.ceil(retryAfterMs / 1000)} s)`;
    return {
      kind: "in_progress",
      ...recorded,
      error: `${what}${after}: the request with this key is still running there`,
      retryAfterMs,
    };
  }
  if (status === 409 && config.conflictAsProcessed) return { kind: "completed", ...recorded };
  if (isRetryableStatus(status)) return { kind: "retryable", ...recorded, error: what, retryAfterMs };
  if (config.clientErrorMode === "complete") return { kind: "completed", ...recorded };
  return {
    kind: "failed",
    ...recorded,
    error: `${what}; not retried (a ${status} will not change by itself). Set clientErrorMode: "complete" to route on it instead`,
  };
}

/**
 * A 409 that says "the request with this key is still running here": with a `Retry-After` (the
 * Idempotency-Key draft's advice to come back), or idemflow's own in-progress problem.
 */
export function isInProgress(status: number, retryAfterMs: number | undefined, body: unknown): boolean {
  if (status !== 409) return false;
  if (retryAfterMs !== undefined) return true;
  if (body === null || typeof body !== "object") return false;
  const problem = body as { code?: unknown; type?: unknown };
  return (
    problem.code === IN_PROGRESS_PROBLEM_CODE || (typeof problem.type === "string" && problem.type.endsWith(`:${IN_PROGRESS_PROBLEM_CODE}`))
  );
}

/** How outcome errors name the call: method, host and path. */
export function endpoint({ method, url }: Attempt): string {
  return `${method} ${url.host}${url.pathname}`;
}
