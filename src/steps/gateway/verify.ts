/**
 * Before a re-attempt of a write: the verify probe (`config.verify`, docs/definitions.md "Verify
 * before re-attempting"). A destination without keys cannot deduplicate a write that landed while
 * its answer (or our record of it) was lost, so the step asks first: a GET, and a condition on its
 * answer that means "already done". The probe goes through the same phases as the write — its
 * url, query and headers evaluated (./evaluate.ts), `{{ secrets.NAME }}` resolved and the host
 * allowlisted (./outbound.ts), built and summarised (./request.ts), sent under the step's
 * `timeoutMs` and `maxResponseBytes` (./send.ts), classified (./classify.ts) — and then:
 *
 * - condition true → the step completes with the probe's answer as its output, marked
 *   `verified: "existing"`; the write is not sent;
 * - condition false (or nothing) → "absent": the write runs as on any attempt;
 * - no answer, 408, 429, 5xx → retryable, counted against the step's retry policy like the write's;
 * - a 404 is an answer ("not there"): the condition decides, with `status` 404;
 * - any other answer (401, 403, 400, 3xx, …) fails the step: whether the earlier attempt wrote is
 *   unknown, and writing anyway is exactly the double write the probe exists to prevent;
 * - the condition throwing or producing a non-boolean fails the step (it would again).
 */
import type { GatewayVertex } from "../../definitions/schema";
import { evaluateValue } from "../../expressions/evaluate";
import { errorMessage } from "../../lib/log";
import type { CallOutcome, RunOutcome } from "../outcome";
import type { ExpressionContext } from "../plan";
import { classifyResponse, classifySendFailure, endpoint, type Attempt } from "./classify";
import { evaluateRequest } from "./evaluate";
import { DEFAULT_DESTINATION_KEY } from "./key";
import { allowlistRefusal, resolveHeaderSecrets } from "./outbound";
import { buildRequest, summariseRequest } from "./request";
import { send } from "./send";
import type { SecretLookup } from "../../secrets/resolve";

/** The output marker of a step the probe found already done (the trace shows it in the output). */
export const VERIFIED_EXISTING = "existing";

/**
 * Whether this attempt must verify first: any attempt after the first of this step (a retry, a
 * takeover and an operator retry all continue the attempt counter), and the first attempt of an
 * execution started over from another one (the old execution's step may have written).
 */
export function mustVerify(claim: { attempt: number; startedOverFrom: string | null }): boolean {
  return claim.attempt > 1 || claim.startedOverFrom !== null;
}

export interface ProbeDeps {
  env: Env;
  secret: SecretLookup;
  fetch: typeof fetch;
  now: () => number;
}

/** `absent`: run the write. `decided`: the attempt ends with this outcome, nothing written. */
export type ProbeResult = { kind: "absent" } | { kind: "decided"; outcome: RunOutcome };

export async function runVerifyProbe(vertex: GatewayVertex, context: ExpressionContext, deps: ProbeDeps): Promise<ProbeResult> {
  const probe = vertex.config.verify;
  if (!probe) return { kind: "absent" };
  // The probe as a GET Gateway call of its own, so the phases need no probe-specific variant.
  const { idempotencyKey: _key, verify: _probe, body: _body, ...rest } = vertex.config;
  const probeVertex: GatewayVertex = {
    ...vertex,
    config: { ...rest, method: "GET", url: probe.url, query: probe.query, headers: probe.headers },
  };

  const evaluation = await evaluateRequest(probeVertex, context, DEFAULT_DESTINATION_KEY);
  if ("error" in evaluation) return fail(evaluation.error);
  const { url, headers } = evaluation.evaluated;
  const secrets = await resolveHeaderSecrets(headers, probe.headers ?? {}, undefined, deps.secret);
  if ("error" in secrets) return fail(secrets.error);
  const { resolved } = secrets;
  const request = summariseRequest("GET", url, resolved.redacted, undefined);
  const refusal = allowlistRefusal(url, deps.env.OUTBOUND_ALLOWLIST);
  if (refusal !== null) return fail(refusal, request);
  const built = buildRequest(url, "GET", resolved.send, undefined);
  if ("error" in built) return fail(`${built.error}; not sent, not retried`, request);

  const sent = await send(built.request, vertex.config, deps.fetch);
  // `complete`: every answer that is not retried comes back as data; which of them count is decided below.
  const attempt: Attempt = {
    method: "GET",
    url,
    request,
    key: undefined,
    secretValues: resolved.values,
    config: { conflictAsProcessed: false, clientErrorMode: "complete" },
  };
  const classified = sent.kind === "answered" ? classifyResponse(sent, attempt, deps.now()) : classifySendFailure(sent, attempt);
  if (classified.kind !== "completed") return decided(asProbeFailure(classified));

  const answer = classified.output as { status: number; headers: unknown; body: unknown };
  if (!((answer.status >= 200 && answer.status < 300) || answer.status === 404)) {
    return fail(
      `${endpoint(attempt)} answered ${answer.status}, so whether an earlier attempt wrote is unknown and nothing was written; ` +
        "not retried (the probe must answer 2xx, or 404 for not there)",
      request,
    );
  }
  let holds: unknown;
  try {
    holds = await evaluateValue(probe.condition, { ...context, status: answer.status, headers: answer.headers, body: answer.body });
  } catch (error) {
    return fail(`the condition failed: ${errorMessage(error)}`, request);
  }
  if (holds === true) {
    return decided({ kind: "completed", output: { verified: VERIFIED_EXISTING, ...answer }, request, response: classified.response });
  }
  if (holds === false || holds === undefined) return { kind: "absent" };
  return fail(`the condition produced ${typeof holds}, not true or false; nothing was written`, request);
}

const decided = (outcome: RunOutcome): ProbeResult => ({ kind: "decided", outcome });

function fail(error: string, request?: RunOutcome["request"]): ProbeResult {
  return decided({ kind: "failed", error: `verify probe: ${error}`, ...(request ? { request } : {}) });
}

/**
 * A probe that got no usable answer. "In progress" is about a key's request, and the probe sends
 * none: for the probe it is a transient answer like a 503, counted against the step's retries.
 */
function asProbeFailure(outcome: Exclude<CallOutcome, { kind: "completed" }>): RunOutcome {
  const error = `verify probe: ${outcome.error}`;
  if (outcome.kind === "in_progress") return { ...outcome, kind: "retryable", error };
  return { ...outcome, error };
}
