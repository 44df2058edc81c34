/**
 * WAIT_FOR_EVENT vertices (SPEC section 14, docs/waits.md): wait for an event with this name whose
 * correlation value equals `match`'s value for this execution, or for the timeout.
 *
 * Every claim of the step runs one batch (src/ledger/events.ts `registerWait`): the first claim
 * registers the wait and its timeout (counted from then); every claim takes the oldest buffered
 * event that matches, if the wait has none; past the timeout with nothing taken, the wait is marked
 * timed out. Then:
 * - an event → completed, the output is the event `{ name, id, match, data, receivedAt }`;
 * - timed out → failed (`onTimeout: "fail"`), or completed with `null` (`"continue"`);
 * - otherwise → parked until the timeout. An event arriving meanwhile un-parks the step and its
 *   claim finds the event; one arriving between this batch and the park is caught by the park.
 */
import { durationMs, type WaitForEventVertex } from "../definitions/schema";
import { correlationOf } from "../lib/correlation";
import { evaluateValue } from "../expressions/evaluate";
import { isoTimeText } from "../lib/iso-time";
import { errorMessage } from "../lib/log";
import { registerWait, type Fence, type TakenEvent } from "../ledger";
import type { RunOutcome } from "./outcome";
import type { ExpressionContext } from "./plan";

export interface WaitFacts {
  db: D1Database;
  fence: Fence;
  workspace: string;
  /** The claim's retry base: an operator retry moves it, and with it the registration. */
  retryBase: number;
  now: number;
}

/** One registration of a step's wait: the step and its retry base. */
export const waitKeyOf = (fence: Fence, retryBase: number): string => `${fence.executionId}/${fence.vertexId}/${retryBase}`;

/** The step's output when an event took it (SPEC section 14). */
export function eventOutput(event: TakenEvent): Record<string, unknown> {
  return { name: event.name, id: event.id, match: event.match, data: event.data, receivedAt: isoTimeText(event.receivedAt) };
}

export async function runWaitForEvent(vertex: WaitForEventVertex, context: ExpressionContext, facts: WaitFacts): Promise<RunOutcome> {
  const { config } = vertex;
  let value: unknown;
  try {
    value = await evaluateValue(config.match, context);
  } catch (error) {
    return { kind: "failed", error: `wait ${vertex.id}: \`match\` failed: ${errorMessage(error)}` };
  }
  const correlation = await correlationOf(value);
  if ("problem" in correlation)
    return { kind: "failed", error: `wait ${vertex.id}: \`match\` gave no correlation value: ${correlation.problem}` };
  const waitKey = waitKeyOf(facts.fence, facts.retryBase);
  const state = await registerWait(facts.db, facts.fence, {
    waitKey,
    retryBase: facts.retryBase,
    workspace: facts.workspace,
    name: config.event,
    matchHash: correlation.hash,
    matchValue: correlation.value,
    consume: config.consume,
    timeoutMs: durationMs(config.timeout),
    now: facts.now,
  });
  switch (state.kind) {
    case "event":
      return { kind: "completed", output: eventOutput(state.event) };
    case "timed_out":
      if (config.onTimeout === "continue") return { kind: "completed", output: null };
      return {
        kind: "failed",
        error:
          `wait ${vertex.id}: no event "${config.event}" with match ${correlation.value} arrived before its timeout ` +
          `(${isoTimeText(state.timeoutAt)}); set onTimeout to "continue" to go on without one`,
      };
    case "waiting":
      return {
        kind: "parked",
        until: state.timeoutAt,
        waitKey,
        detail: `waiting for "${config.event}" with match ${correlation.value} until ${isoTimeText(state.timeoutAt)}`,
      };
    case "fenced_out":
      // The claim was taken over before the batch: the new owner runs the wait; this run's result is fenced out anyway.
      return { kind: "retryable", error: "the wait's claim was taken over before it registered" };
  }
}
