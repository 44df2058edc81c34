/**
 * One step message, end to end: claim (with the context, one round trip) → run the vertex →
 * settle and dispatch (one batch) → send the successors' messages after the commit.
 *
 * Returns what to do with the message; the consumer applies it. A throw means the worker
 * "crashed" mid-step: the step stays EXECUTING under its lease and is taken over after it.
 */
import {
  DEFAULT_RETRY,
  WorkflowDefinition as WorkflowDefinitionSchema,
  type RetryPolicy,
  type Vertex,
  type WorkflowDefinition,
} from "../definitions/schema";
import { STEP_INPUTS_VERSION } from "../definitions/step-inputs";
import {
  claimAndLoad,
  extendLease,
  IN_PROGRESS_MARK,
  MAX_STEP_INPUT_BYTES,
  persistIdempotencyKey,
  scheduleRetry,
  settleAndDispatch,
  type ClaimedStep,
  type Fence,
  type SettleOutcome,
  type StepInputsRow,
  type StepRef,
  type StepRunRow,
} from "../ledger/steps";
import { sendStepMessages } from "./dispatch";
import { runGateway } from "./gateway";
import { descendantsInOrder, takenSuccessors, vertexOf } from "./graph";
import type { RunOutcome } from "./outcome";
import type { ExpressionContext } from "./plan";
import { dropsIfNotClaimable, type Delivery } from "./redelivery";
import { delaySeconds, inProgressBudgetMs, inProgressWaitMs, planRetry } from "./retry-policy";
import type { StepRuntime } from "./runtime";
import { runTransform } from "./transform";
import { secretLookup } from "../secrets/resolve";
import { parseSealedSecrets } from "../secrets/store";
import { errorMessage, log } from "../lib/log";

export type Decision =
  | { action: "ack"; why: string }
  | { action: "retry"; delayMs: number; why: string }
  /** The step is waiting (live lease, not due) and this message bounced enough: ack it (src/steps/redelivery.ts). */
  | { action: "drop"; why: string }
  | { action: "poison"; why: string };

const definitions = new Map<string, WorkflowDefinition>();

/** Definitions are immutable per version, so a parsed one is cached per isolate. */
function definitionOf(run: StepRunRow): WorkflowDefinition {
  const cacheKey = `${run.workspace}/${run.workflow_id}/${run.version}`;
  let definition = definitions.get(cacheKey);
  if (!definition) {
    // Parsing (not re-validating the graph) fills the schema defaults: timeoutMs, retry, …
    definition = WorkflowDefinitionSchema.parse(JSON.parse(run.definition));
    if (definitions.size > 500) definitions.delete(definitions.keys().next().value as string);
    definitions.set(cacheKey, definition);
  }
  return definition;
}

/**
 * A missed claim: settled → ack; waiting (live lease elsewhere, not due) → bounce the message
 * until its delivery count reaches the drop threshold, then ack it (the claim batch recorded the
 * `redelivery_dropped` event in the same transaction; the reaper covers the step).
 */
function whyNotClaimed(run: StepRunRow, now: number, drop: boolean): Decision {
  switch (run.step_state) {
    case null:
      return { action: "poison", why: `execution ${run.execution_id} has no step for this vertex` };
    case "COMPLETED":
    case "FAILED":
    case "SKIPPED":
      return { action: "ack", why: `step already ${run.step_state}` };
    case "EXECUTING":
      if (drop) return { action: "drop", why: "lease held by another worker; the reaper re-dispatches the step if the lease expires" };
      return { action: "retry", delayMs: Math.max(1000, (run.lease_until ?? now) - now), why: "lease held by another worker" };
    case "DISPATCHED":
      if (drop) return { action: "drop", why: "not due yet; the reaper re-sends the step once it is overdue" };
      return { action: "retry", delayMs: Math.max(1000, (run.available_at ?? now) - now), why: "not due yet (retry backoff)" };
  }
}

/** Extend the lease while `work` runs, fenced: a long Gateway call keeps its step. */
async function withHeartbeat<T>(rt: StepRuntime, fence: Fence, work: () => Promise<T>): Promise<T> {
  const every = rt.heartbeatEveryMs ?? Math.max(1000, Math.floor(rt.leaseMs / 3));
  if (every === null || every <= 0) return work();
  const timer = setInterval(() => {
    extendLease(rt.db, fence, rt.now(), rt.leaseMs)
      .then((ours) => {
        if (!ours) log.warn("step.heartbeat_fenced_out", { message: "the step was taken over", ...fence });
      })
      .catch((error) => log.error("step.heartbeat_failed", { ...fence, error: errorMessage(error) }));
  }, every);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

async function runVertex(
  rt: StepRuntime,
  run: StepRunRow,
  vertex: Vertex | undefined,
  context: ExpressionContext,
  fence: Fence,
  claimed: ClaimedStep,
): Promise<RunOutcome> {
  if (!vertex) return { kind: "failed", error: `vertex ${fence.vertexId} is not in the execution's pinned definition` };
  switch (vertex.type) {
    case "GATEWAY":
      return withHeartbeat(rt, fence, () =>
        runGateway(vertex, context, {
          env: rt.env,
          secret: secretLookup({
            workspace: run.workspace,
            stored: parseSealedSecrets(run.secrets),
            env: rt.env as unknown as Record<string, unknown>,
          }),
          fetch: rt.fetch,
          now: rt.now,
          persistedKey: claimed.idempotencyKey,
          persistKey: (key) => persistIdempotencyKey(rt.db, fence, key, rt.now()),
        }),
      );
    case "TRANSFORM":
      return runTransform(vertex, context);
    case "ENTRY_POINT":
      // Ingress writes the entry COMPLETED; a message for it can only be a stray. Its output is the payload.
      return { kind: "completed", output: context.payload };
  }
}

function retryPolicyOf(vertex: Vertex | undefined): RetryPolicy | null {
  if (vertex?.type !== "GATEWAY") return null; // only side-effecting calls meet transient failures
  return vertex.config.retry ?? DEFAULT_RETRY;
}

const json = (value: unknown): string => JSON.stringify(value ?? null);

/**
 * Claims a step may take beyond its retry budget without ever settling. Every claim counts as an
 * attempt, and a worker that dies mid-step (a deterministic crash, an output D1 refuses, a
 * request that always exceeds the Worker's limits) never settles: without a bound the takeover
 * and the reaper would re-run it forever. Generous, so chance crashes never exhaust it.
 */
export const CRASH_ALLOWANCE = 10;

/**
 * The largest step output (UTF-8 bytes of its JSON) stored on the step row. D1 refuses rows over
 * 2 MB, and a settle batch D1 refuses would crash the worker on every attempt; over the bound the
 * step fails loudly instead (a Gateway response is already bounded by `maxResponseBytes` ≤ 1 MiB).
 */
export const MAX_OUTPUT_BYTES = 1_500_000;

/** An outcome whose output is over MAX_OUTPUT_BYTES becomes a FAILED one without that output. */
function boundOutput(outcome: RunOutcome): RunOutcome {
  if (outcome.output === undefined) return outcome;
  const bytes = new TextEncoder().encode(json(outcome.output)).byteLength;
  if (bytes <= MAX_OUTPUT_BYTES) return outcome;
  return {
    kind: "failed",
    ...(outcome.request ? { request: outcome.request } : {}),
    error: `the step's output is ${bytes} bytes of JSON, over the ${MAX_OUTPUT_BYTES}-byte bound; it was not stored. Make the output smaller`,
  };
}

/** Settle a claimed step FAILED without running it (fenced like any settle). */
async function settleFailedUnrun(rt: StepRuntime, fence: Fence, error: string): Promise<Decision> {
  const result = await settleAndDispatch(rt.db, {
    fence,
    now: rt.now(),
    outcome: { state: "FAILED", error, output: null },
    request: null,
    backfill: [],
    descendants: [],
  });
  log.error("step.failed_unrun", { ...fence, error });
  return { action: "ack", why: result.settled ? "settled FAILED" : "fenced out (recorded)" };
}

/** Back to DISPATCHED, due after `delayMs` (fenced, one batch), then the delayed message. */
async function retryLater(
  rt: StepRuntime,
  ref: StepRef,
  fence: Fence,
  r: { now: number; delayMs: number; error: string; request: string | null; output: unknown; uncounted: boolean },
): Promise<Decision> {
  const ours = await scheduleRetry(rt.db, fence, {
    now: r.now,
    availableAt: r.now + r.delayMs,
    error: r.error,
    request: r.request,
    output: r.output === undefined ? null : json(r.output),
    uncounted: r.uncounted,
  });
  if (!ours) return { action: "ack", why: "retry fenced out (recorded)" };
  await sendStepMessages(rt.queue, [ref], delaySeconds(r.delayMs));
  return { action: "ack", why: `retry scheduled in ${r.delayMs} ms` };
}

/**
 * Why a step's inputs cannot be loaded: over the bound, with the biggest outputs named so the
 * author knows what to shrink or stop referencing.
 */
function inputsTooLarge(inputs: StepInputsRow): string {
  const sizes = Object.entries(JSON.parse(inputs.output_sizes ?? "{}") as Record<string, number>).sort((a, b) => b[1] - a[1]);
  const named = sizes.slice(0, 5).map(([id, bytes]) => `steps.${id} (${bytes} bytes)`);
  if (inputs.reads_payload) named.push("the payload");
  return (
    `the step's inputs are ${inputs.input_bytes} bytes, over the ${MAX_STEP_INPUT_BYTES}-byte bound on what one step may load ` +
    `(D1 refuses values and rows over 2,000,000 bytes); it reads ${named.join(", ") || "no outputs"}. ` +
    "Reference only the outputs the step needs (a dynamic reference such as `steps.*` or `$lookup(steps, …)` loads them all), or make those outputs smaller"
  );
}

/** The JSONata context of a claimed step: the payload and outputs it reads (the entry's output is the payload). */
function contextOf(ref: StepRef, run: StepRunRow, inputs: StepInputsRow): ExpressionContext {
  const payload = inputs.payload === null ? undefined : (JSON.parse(inputs.payload) as unknown);
  const steps = JSON.parse(inputs.outputs ?? "{}") as Record<string, unknown>;
  if (inputs.reads_payload) steps[run.entry_vertex_id] = payload;
  return { payload, steps, execution: { id: ref.executionId, workflowId: run.workflow_id, trigger: run.trigger_kind } };
}

export async function runStep(
  ref: StepRef,
  rt: StepRuntime,
  delivery: Delivery = { messageId: "(direct)", attempts: 1 },
): Promise<Decision> {
  const claimedAt = rt.now();
  const drop = dropsIfNotClaimable(delivery);
  const dropDetail = drop ? `message ${delivery.messageId} (delivery ${delivery.attempts})` : undefined;
  const { claimed, run, inputs } = await claimAndLoad(rt.db, ref, claimedAt, rt.leaseMs, dropDetail, {
    maxBytes: MAX_STEP_INPUT_BYTES,
    analysisVersion: STEP_INPUTS_VERSION,
  });
  if (!run) return { action: "poison", why: `unknown execution ${ref.executionId}` };
  if (!claimed) return whyNotClaimed(run, claimedAt, drop);

  const fence: Fence = { ...ref, epoch: claimed.epoch };
  let definition: WorkflowDefinition;
  try {
    definition = definitionOf(run);
  } catch (error) {
    // Not a crash to retry: the pinned version would fail the same way on every takeover.
    return settleFailedUnrun(
      rt,
      fence,
      `the execution's pinned workflow version ${run.version} can no longer be read: ${errorMessage(error)}`,
    );
  }
  if (!inputs || inputs.outputs === null) {
    // Over the bound: nothing was built. Failing it now, fenced, ends the step (and the execution)
    // instead of a claim that D1 refuses on every redelivery.
    return settleFailedUnrun(rt, fence, inputs ? inputsTooLarge(inputs) : "the step's inputs could not be read after its claim");
  }
  const vertex = vertexOf(definition, ref.vertexId);
  const context = contextOf(ref, run, inputs);
  const unrecorded = JSON.parse(inputs.unrecorded) as string[];

  const claimBudget = (retryPolicyOf(vertex)?.maxAttempts ?? 1) + CRASH_ALLOWANCE;
  const claims = claimed.attempt - claimed.retryBase;
  let outcome: RunOutcome;
  if (claims > claimBudget) {
    outcome = {
      kind: "failed",
      error: `gave up: this step was claimed ${claims - 1} times (retries included) without settling — its worker crashed or lost its lease again and again; not run again`,
    };
  } else {
    outcome = boundOutput(await runVertex(rt, run, vertex, context, fence, claimed));
    await rt.afterRun?.(fence);
  }

  const now = rt.now();
  const request = "request" in outcome && outcome.request ? json(outcome.request) : null;

  if (outcome.kind === "in_progress") {
    const policy = retryPolicyOf(vertex) ?? DEFAULT_RETRY;
    const since = run.in_progress_since ?? now;
    const budget = inProgressBudgetMs(policy);
    const waited = now - since;
    if (waited < budget) {
      const delayMs = inProgressWaitMs(policy, outcome.retryAfterMs, since + budget - now);
      const error =
        `${IN_PROGRESS_MARK} (attempt ${claimed.attempt}): ${outcome.error}; asking again in ${delayMs} ms ` +
        `(in-progress budget until ${new Date(since + budget).toISOString()})`;
      return retryLater(rt, ref, fence, { now, delayMs, error, request, output: outcome.output, uncounted: true });
    }
    outcome = {
      kind: "failed",
      error:
        `the destination still answers "in progress" for this step's key ${Math.round(waited / 1000)} s after it first did: ` +
        `the in-progress budget (retry.inProgressBudgetMs ${budget} ms) ran out (${outcome.error}). The earlier request may still ` +
        `finish there: check the destination before an operator retry (it re-sends the same key), or raise retry.inProgressBudgetMs`,
      ...(outcome.output === undefined ? {} : { output: outcome.output }),
    };
  }

  if (outcome.kind === "retryable") {
    const policy = retryPolicyOf(vertex);
    const used = claimed.attempt - claimed.retryBase;
    if (policy && used < policy.maxAttempts) {
      const plan = planRetry(policy, used, rt.random, outcome.retryAfterMs);
      if ("delayMs" in plan) {
        const error = `attempt ${claimed.attempt}: ${outcome.error}`;
        return retryLater(rt, ref, fence, { now, delayMs: plan.delayMs, error, request, output: outcome.output, uncounted: false });
      }
      outcome = {
        kind: "failed",
        error: `${outcome.error}: ${plan.refused}`,
        ...(outcome.output === undefined ? {} : { output: outcome.output }),
      };
    } else {
      outcome = {
        kind: "failed",
        error: `gave up after ${used} attempt(s): ${outcome.error}`,
        ...(outcome.output === undefined ? {} : { output: outcome.output }),
      };
    }
  }

  let settle: SettleOutcome;
  const backfill: Array<{ vertexId: string; nextVertices: string[] }> = [];
  if (outcome.kind === "completed") {
    const after: ExpressionContext = { ...context, steps: { ...context.steps, [ref.vertexId]: outcome.output } };
    try {
      const nextVertices = await takenSuccessors(definition, ref.vertexId, after);
      // A COMPLETED step without recorded edges was written by ingress (the entry): record them
      // now, so the fan-in decisions in this batch can read them.
      for (const id of unrecorded) {
        if (id !== ref.vertexId) backfill.push({ vertexId: id, nextVertices: await takenSuccessors(definition, id, after) });
      }
      settle = { state: "COMPLETED", output: json(outcome.output), nextVertices };
    } catch (error) {
      settle = {
        state: "FAILED",
        output: json(outcome.output),
        error: `an edge condition failed: ${errorMessage(error)}`,
      };
    }
  } else {
    settle = { state: "FAILED", error: outcome.error, output: outcome.output === undefined ? null : json(outcome.output) };
  }

  const result = await settleAndDispatch(rt.db, {
    fence,
    now,
    outcome: settle,
    request,
    backfill,
    descendants: settle.state === "COMPLETED" ? descendantsInOrder(definition, ref.vertexId) : [],
  });
  if (!result.settled) {
    log.warn("step.fenced_out", { message: "late result fenced out and recorded", ...fence, outcome: settle.state });
    return { action: "ack", why: "fenced out (recorded)" };
  }
  if (settle.state === "FAILED") {
    log.warn("step.failed", { ...fence, attempt: claimed.attempt, error: settle.error });
  }
  await sendStepMessages(
    rt.queue,
    result.dispatched.map((vertexId) => ({ executionId: ref.executionId, vertexId })),
  );
  return { action: "ack", why: `settled ${settle.state}` };
}
