/**
 * GATEWAY vertices: one HTTP call to a third party, with a stable destination key.
 *
 * Each attempt runs six phases, one module each; every phase either hands the next what it needs
 * or ends the attempt with an outcome (never a throw, except for a fault in idemflow itself):
 * 1. ./evaluate.ts — url, headers, query and body evaluated against the execution context;
 * 2. ./key.ts — the destination key (src/definitions/destination-key.ts: a header of any name or
 *    a JSON body field, ./body-key.ts): persisted by an earlier attempt, else evaluated, validated
 *    against the destination's constraints and persisted BEFORE the first send, its first send to
 *    the destination (the URL's origin, or the connector it went through) on record; then ./retention.ts refuses a key older than
 *    the destination's declared retention (the retention guard);
 * 3. ./outbound.ts — `{{ secrets.NAME }}` resolved for the execution's workspace, the host checked
 *    against the outbound allowlist;
 * 4. ./request.ts — the request built (every header value checked) and its redacted summary;
 * 5. ./send.ts — the call, under a timeout and `maxResponseBytes`, redirects not followed;
 * 6. ./classify.ts — the answer (or its absence) turned into the step's outcome.
 * Before all six, on a re-attempt of a step that declares `verify`: ./verify.ts runs the probe
 * through the same phases; when the write is found already done, the attempt ends there.
 */
import { destinationKeyOf, keySendDestination } from "../../definitions/destination-key";
import { setOwnMember } from "../../lib/own-member";
import type { GatewayVertex } from "../../definitions/schema";
import type { SecretLookup } from "../../secrets/resolve";
import type { RunOutcome } from "../outcome";
import type { ExpressionContext } from "../plan";
import { classifyResponse, classifySendFailure } from "./classify";
import { placeKeyInBody } from "./body-key";
import { evaluateRequest } from "./evaluate";
import { resolveKeyToSend, type KeyStore } from "./key";
import { guardedSend, retentionRefusal, type ColdRecall } from "./retention";
import { allowlistRefusal, resolveHeaderSecrets } from "./outbound";
import { buildRequest, summariseRequest } from "./request";
import { send } from "./send";
import { runVerifyProbe } from "./verify";

export { buildRequest } from "./request";
export { IN_PROGRESS_PROBLEM_CODE, isInProgress } from "./classify";
export { DEFAULT_DESTINATION_KEY, type DestinationKeyRule } from "./key";
export { mustVerify, VERIFIED_EXISTING } from "./verify";

export interface GatewayDeps extends KeyStore {
  /** `OUTBOUND_ALLOWLIST`. */
  env: Env;
  /** `{{ secrets.NAME }}` for the execution's workspace (src/secrets/resolve.ts). */
  secret: SecretLookup;
  fetch: typeof fetch;
  now: () => number;
  /** An earlier attempt (of this step, or of the execution this one started over from) may have written: verify first. */
  reattempt?: boolean;
  /** The retention guard's cold lookup (src/keys/recall.ts); absent: the hot row only. */
  recallColdSend?: ColdRecall;
  /** Told when the retention guard refuses (the `step.retention_refused` notification, src/notifications). */
  onRetentionRefused?: () => Promise<void>;
}

export async function runGateway(vertex: GatewayVertex, context: ExpressionContext, deps: GatewayDeps): Promise<RunOutcome> {
  const config = vertex.config;
  const method = config.method;
  // A saved version always resolves (validation reports its problems), so this does not throw.
  const keyRule = destinationKeyOf(config);

  if (config.verify && deps.reattempt) {
    const probe = await runVerifyProbe(vertex, context, deps);
    if (probe.kind === "decided") return probe.outcome;
  }

  const evaluation = await evaluateRequest(vertex, context, keyRule);
  if ("error" in evaluation) return { kind: "failed", error: evaluation.error };
  const { url, headers } = evaluation.evaluated;
  let { body } = evaluation.evaluated;

  let key: string | undefined;
  if (keyRule !== null) {
    const destination = keySendDestination(vertex.config, url);
    const resolvedKey = await resolveKeyToSend(vertex.id, keyRule.expression, context, deps, keyRule, destination);
    if ("error" in resolvedKey) return { kind: "failed", error: resolvedKey.error };
    key = resolvedKey.key;
    if (keyRule.retentionMs !== null) {
      const recalled = await guardedSend(deps.recallColdSend, vertex.id, key, destination, resolvedKey.send);
      if ("error" in recalled) return { kind: recalled.retry ? "retryable" : "failed", error: recalled.error };
      const facts = { vertexId: vertex.id, key, destination, send: recalled.send, retentionMs: keyRule.retentionMs, now: deps.now() };
      const refusal = retentionRefusal(facts);
      if (refusal !== null) {
        await deps.onRetentionRefused?.();
        return { kind: "failed", error: refusal };
      }
    }
    // Own member whatever the declared name: `headers["__proto__"] = key` would drop the key.
    if ("header" in keyRule.location) setOwnMember(headers, keyRule.location.header, key);
    else {
      const placed = placeKeyInBody(body, keyRule.location.bodyField, key);
      if ("error" in placed) return { kind: "failed", error: `gateway ${vertex.id}: ${placed.error}; not sent, not retried` };
      body = placed.body;
    }
  }

  const keyHeader = keyRule !== null && "header" in keyRule.location ? keyRule.location.header : undefined;
  const secrets = await resolveHeaderSecrets(headers, config.headers ?? {}, keyHeader, deps.secret);
  if ("error" in secrets) return { kind: "failed", error: secrets.error };
  const { resolved } = secrets;
  const request = summariseRequest(method, url, resolved.redacted, body);
  const refusal = allowlistRefusal(url, deps.env.OUTBOUND_ALLOWLIST);
  if (refusal !== null) return { kind: "failed", request, error: refusal };

  const built = buildRequest(url, method, resolved.send, body);
  if ("error" in built) return { kind: "failed", request, error: `gateway ${vertex.id}: ${built.error}; not sent, not retried` };

  const sent = await send(built.request, config, deps.fetch);
  const attempt = { method, url, request, key, secretValues: resolved.values, config };
  if (sent.kind !== "answered") return classifySendFailure(sent, attempt);
  return classifyResponse(sent, attempt, deps.now());
}
