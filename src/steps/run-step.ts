/**
 * One step message, end to end, as four phases:
 *
 *   claim    — claim the step and load what it reads (one round trip, src/ledger `claimAndLoad`);
 *   execute  — run the vertex through its type's module (src/steps/vertices: a Gateway call under a
 *              heartbeat, a transform, a DELAY or a wait that may park), one table, no branch here;
 *   decide   — a pure function of (outcome, claim, policy, now) picks ONE transition
 *              (src/steps/decide.ts);
 *   apply    — that transition through the ledger, fenced (settle-and-dispatch, back to
 *              DISPATCHED for a later attempt, or park), then the queue messages after the commit.
 *
 * A resume is not a phase here: an event's batch or a wake-up makes a parked step claimable, and the
 * resume is the next claim (src/ledger/events.ts, src/steps/cron.ts).
 *
 * Returns what to do with the message; the consumer applies it. A throw means the worker
 * "crashed" mid-step: the step stays EXECUTING under its lease and is taken over after it.
 */
import { WorkflowDefinition as WorkflowDefinitionSchema, type Vertex, type WorkflowDefinition } from "../definitions/schema";
import { STEP_INPUTS_VERSION } from "../definitions/step-inputs";
import { notifyExecutionFailed } from "../notifications/messages";
import { startCompensation } from "./compensate";
import { asStored, chainedStep, contextOf, inputsFromMemory, settleQueries, type ChainedStep, type KnownInputs } from "./chain";
import {
  claimAndLoad,
  loadStepInputs,
  MAX_STEP_INPUT_BYTES,
  parkStep,
  scheduleInProgressRecheck,
  scheduleRetry,
  settleAndDispatch,
  type ClaimedStep,
  type Fence,
  type SettleOutcome,
  type StepInputs,
  type StepRef,
  type StepRun,
} from "../ledger";
import { parkForPermit } from "../ledger/connector-permits";
import { decide, overClaimBudget, type ClaimFacts, type Transition } from "./decide";
import { sendStepMessages } from "./dispatch";
import { descendantsInOrder, takenSuccessors, vertexOf } from "./graph";
import { MAX_OUTPUT_BYTES, type ResponseSummary, type RunOutcome } from "./outcome";
import type { ExpressionContext } from "./plan";
import { dropsIfNotClaimable, type Delivery } from "./redelivery";
import { delaySeconds } from "./retry-policy";
import type { StepRuntime } from "./runtime";
import { MAX_QUEUE_DELAY_MS } from "./delay";
import { executeVertex, retryPolicyOf } from "./vertices";
import { inlineTransform } from "./inline-transform";
import { isoTimeText } from "../lib/iso-time";
import { errorMessage, log } from "../lib/log";

export { CRASH_ALLOWANCE } from "./decide";
export { MAX_OUTPUT_BYTES } from "./outcome";

export type Decision =
  | { action: "ack"; why: string }
  | { action: "retry"; delayMs: number; why: string }
  /** The step is waiting (live lease, not due) and this message bounced enough: ack it (src/steps/redelivery.ts). */
  | { action: "drop"; why: string }
  | { action: "poison"; why: string }
  /** No such execution on this shard: removed (its tombstone says so) or a message on the wrong shard (src/steps/consumer.ts). */
  | { action: "missing"; why: string };

export async function runStep(
  ref: StepRef,
  rt: StepRuntime,
  delivery: Delivery = { messageId: "(direct)", attempts: 1 },
): Promise<Decision> {
  // 1. Claim.
  const claimedAt = rt.now();
  const drop = dropsIfNotClaimable(delivery);
  const { claimed, run, inputs } = await claimAndLoad(rt.db, ref, claimedAt, rt.leaseMs, {
    message: `message ${delivery.messageId} (delivery ${delivery.attempts})`,
    dropIfWaiting: drop,
    permitWake: delivery.permitWake === true,
    inputs: { maxBytes: MAX_STEP_INPUT_BYTES, analysisVersion: STEP_INPUTS_VERSION },
  });
  if (!run) return { action: "missing", why: `unknown execution ${ref.executionId}` };
  if (!claimed) return whyNotClaimed(run, claimedAt, drop);
  const known: KnownInputs = { payload: null, outputs: new Map() };
  const { decision, next } = await runClaimed(rt, { ref, run, claimed, claimedAt, leaseMs: rt.leaseMs, known, offer: null }, inputs);
  // The message's own step is settled (or rescheduled): whatever happens to the chain, it is acked.
  if (next) await runChainedSteps(rt, next);
  return decision;
}

/**
 * Run steps a chained claim took, one after the other, while the settles keep chaining within the
 * budget (src/steps/chain.ts). A crash ends the chain where it is: the step stays EXECUTING under
 * its lease and the reaper re-dispatches it once the lease expired — nothing is retried here.
 */
export async function runChainedSteps(rt: StepRuntime, first: ChainedStep): Promise<void> {
  let next: ChainedStep | null = first;
  while (next) {
    const step: ChainedStep = next;
    try {
      await rt.beforeChainedRun?.({ ...step.ref, epoch: step.claimed.epoch });
      const inputs =
        inputsFromMemory(definitionOf(step.run), step.ref.vertexId, step.known, MAX_STEP_INPUT_BYTES) ??
        (await loadStepInputs(rt.db, step.ref, step.claimedAt, { maxBytes: MAX_STEP_INPUT_BYTES, analysisVersion: STEP_INPUTS_VERSION }));
      ({ next } = await runClaimed(rt, step, inputs));
    } catch (error) {
      log.error("step.crashed", {
        message: "chained step crashed; the reaper re-dispatches it after its lease",
        ...step.ref,
        epoch: step.claimed.epoch,
        error: errorMessage(error),
      });
      return;
    } finally {
      if (step.offer) rt.budget?.ran(step.offer);
    }
  }
}

/** A claimed step and what its run needs: the claim's result, or a chained claim's. */
type Claimed = ChainedStep;

/** Phases 2–4 of a claimed step; `next` is the successor its settle claimed for this invocation to run. */
async function runClaimed(
  rt: StepRuntime,
  c: Claimed,
  inputs: StepInputs | null,
): Promise<{ decision: Decision; next: ChainedStep | null }> {
  const { ref, run, claimed } = c;
  const fence: Fence = { ...ref, epoch: claimed.epoch };
  const step = prepare(ref, run, inputs);
  if ("unrunnable" in step) return { decision: await settleFailedUnrun(rt, fence, step.unrunnable), next: null };

  // 2. Execute (unless the step already used up its claims).
  const policy = retryPolicyOf(step.vertex);
  const facts: ClaimFacts = { attempt: claimed.attempt, retryBase: claimed.retryBase, inProgressSince: run.inProgressSince };
  const outcome = overClaimBudget(facts, policy) ?? (await execute(rt, run, step, fence, claimed, c.leaseMs));

  // 3. Decide, 4. apply.
  const now = rt.now();
  const transition = decide(outcome, facts, policy, now, rt.random);
  const request = outcome.request ? json(outcome.request) : null;
  const known = knownAfter(c.known, inputs);
  return apply(
    rt,
    { ref, run, known, fence, step, attempt: claimed.attempt, now, request, response: outcome.response ?? null },
    transition,
  );
}

/** What the invocation holds after loading a step's inputs: what it held, and what it just read. */
function knownAfter(known: KnownInputs, inputs: StepInputs | null): KnownInputs {
  if (!inputs?.withinBound) return known;
  return {
    payload: inputs.readsPayload ? { value: inputs.payload } : known.payload,
    outputs: new Map([...known.outputs, ...Object.entries(inputs.outputs)]),
  };
}

// ---------------------------------------------------------------------------------------------
// Claim

/**
 * A missed claim: settled → ack; waiting (live lease elsewhere, not due) → bounce the message
 * until its delivery count reaches the drop threshold, then ack it (the claim batch recorded the
 * `redelivery_dropped` event in the same transaction; the reaper covers the step).
 */
function whyNotClaimed(run: StepRun, now: number, drop: boolean): Decision {
  switch (run.stepState) {
    case null:
      return { action: "poison", why: `execution ${run.executionId} has no step for this vertex` };
    case "COMPLETED":
    case "FAILED":
    case "SKIPPED":
    case "CANCELLED":
      return { action: "ack", why: `step already ${run.stepState}` };
    case "EXECUTING":
      // Parked (a DELAY sleeping): its wake-up is on its way (a delayed message, or the cron's wake-up task).
      // A wake-up that arrives a little early (a queue's delay is not exact) is bounced to its time,
      // not acked: acked, it would leave the step to the cron's wake-up task — a minute late, and a
      // permit waiter holding its scope's line meanwhile (docs/connectors.md "Limits").
      if (run.parkedUntil !== null && run.parkedUntil > now && run.parkedUntil - now <= EARLY_WAKE_BOUNCE_MS) {
        return {
          action: "retry",
          delayMs: run.parkedUntil - now,
          why: `a wake-up early by ${run.parkedUntil - now} ms: retried at its time`,
        };
      }
      if (run.parkedUntil !== null) return { action: "ack", why: `the step is parked until ${isoTimeText(run.parkedUntil)}` };
      if (drop) return { action: "drop", why: "lease held by another worker; the reaper re-dispatches the step if the lease expires" };
      return { action: "retry", delayMs: Math.max(1000, (run.leaseUntil ?? now) - now), why: "lease held by another worker" };
    case "DISPATCHED":
      if (drop) return { action: "drop", why: "not due yet; the reaper re-sends the step once it is overdue" };
      return { action: "retry", delayMs: Math.max(1000, (run.availableAt ?? now) - now), why: "not due yet (retry backoff)" };
  }
}

/** How early a parked step's wake-up may arrive and still be retried at its time rather than acked. */
export const EARLY_WAKE_BOUNCE_MS = 5_000;

/** A claimed step ready to run: its pinned definition, vertex, expression context and the unrecorded edges. */
interface PreparedStep {
  definition: WorkflowDefinition;
  vertex: Vertex | undefined;
  context: ExpressionContext;
  unrecorded: string[];
}

const definitions = new Map<string, WorkflowDefinition>();

/** Definitions are immutable per version, so a parsed one is cached per isolate. */
function definitionOf(run: StepRun): WorkflowDefinition {
  const cacheKey = `${run.workspace}/${run.workflowId}/${run.version}`;
  let definition = definitions.get(cacheKey);
  if (!definition) {
    // Parsing (not re-validating the graph) fills the schema defaults: timeoutMs, retry, …
    definition = WorkflowDefinitionSchema.parse(JSON.parse(run.definitionJson));
    if (definitions.size > 500) definitions.delete(definitions.keys().next().value as string);
    definitions.set(cacheKey, definition);
  }
  return definition;
}

/**
 * What a claimed step runs with — or why it cannot run at all (then it is settled FAILED unrun:
 * not a crash to retry, it would fail the same way on every takeover).
 */
function prepare(ref: StepRef, run: StepRun, inputs: StepInputs | null): PreparedStep | { unrunnable: string } {
  let definition: WorkflowDefinition;
  try {
    definition = definitionOf(run);
  } catch (error) {
    return { unrunnable: `the execution's pinned workflow version ${run.version} can no longer be read: ${errorMessage(error)}` };
  }
  // Over the bound nothing was built: failing now ends the step (and the execution) instead of a
  // claim that D1 refuses on every redelivery.
  if (!inputs) return { unrunnable: "the step's inputs could not be read after its claim" };
  if (!inputs.withinBound) return { unrunnable: inputsTooLarge(inputs) };
  return {
    definition,
    vertex: vertexOf(definition, ref.vertexId),
    context: contextOf(inputs, run.entryVertexId, { id: ref.executionId, workflowId: run.workflowId, trigger: run.triggerKind }),
    unrecorded: inputs.unrecorded,
  };
}

/**
 * Why a step's inputs cannot be loaded: over the bound, with the biggest outputs named so the
 * author knows what to shrink or stop referencing.
 */
function inputsTooLarge(inputs: Extract<StepInputs, { withinBound: false }>): string {
  const sizes = Object.entries(inputs.outputSizes).sort((a, b) => b[1] - a[1]);
  const named = sizes.slice(0, 5).map(([id, bytes]) => `steps.${id} (${bytes} bytes)`);
  if (inputs.readsPayload) named.push("the payload");
  return (
    `the step's inputs are ${inputs.inputBytes} bytes, over the ${MAX_STEP_INPUT_BYTES}-byte bound on what one step may load ` +
    `(D1 refuses values and rows over 2,000,000 bytes); it reads ${named.join(", ") || "no outputs"}. ` +
    "Reference only the outputs the step needs (a dynamic reference such as `steps.*` or `$lookup(steps, …)` loads them all), " +
    "or make those outputs smaller"
  );
}

// ---------------------------------------------------------------------------------------------
// Execute

async function execute(
  rt: StepRuntime,
  run: StepRun,
  step: PreparedStep,
  fence: Fence,
  claimed: ClaimedStep,
  leaseMs: number,
): Promise<RunOutcome> {
  const outcome = boundOutput(await runVertex(rt, run, step, fence, claimed, leaseMs));
  await rt.afterRun?.(fence);
  return outcome;
}

async function runVertex(
  rt: StepRuntime,
  run: StepRun,
  step: PreparedStep,
  fence: Fence,
  claimed: ClaimedStep,
  leaseMs: number,
): Promise<RunOutcome> {
  const { vertex, context } = step;
  if (!vertex) return { kind: "failed", error: `vertex ${fence.vertexId} is not in the execution's pinned definition` };
  return executeVertex(vertex, { rt, run, claimed, fence, leaseMs, context });
}

/** An outcome whose output is over MAX_OUTPUT_BYTES becomes a FAILED one without that output. */
function boundOutput(outcome: RunOutcome): RunOutcome {
  if (outcome.output === undefined) return outcome;
  const bytes = new TextEncoder().encode(json(outcome.output)).byteLength;
  if (bytes <= MAX_OUTPUT_BYTES) return outcome;
  return {
    kind: "failed",
    ...(outcome.request ? { request: outcome.request } : {}),
    ...(outcome.response ? { response: outcome.response } : {}),
    error:
      `the step's output is ${bytes} bytes of JSON, over the ${MAX_OUTPUT_BYTES}-byte bound; ` +
      "it was not stored. Make the output smaller",
  };
}

const json = (value: unknown): string => JSON.stringify(value ?? null);

// ---------------------------------------------------------------------------------------------
// Apply

interface Applying {
  ref: StepRef;
  run: StepRun;
  /** What the invocation holds of the execution (a chained successor's inputs may come from it). */
  known: KnownInputs;
  fence: Fence;
  step: PreparedStep;
  attempt: number;
  now: number;
  /** The redacted request summary (JSON), if the attempt made one. */
  request: string | null;
  /** What the destination answered, if it did (the attempt's record). */
  response: ResponseSummary | null;
}

type Applied = { decision: Decision; next: ChainedStep | null };

async function apply(rt: StepRuntime, a: Applying, t: Transition): Promise<Applied> {
  const output = "output" in t && t.output !== undefined ? json(t.output) : null;
  const later = { now: a.now, request: a.request, response: a.response, output };
  switch (t.kind) {
    case "retry": {
      const retry = { ...later, availableAt: a.now + t.delayMs, delayReason: t.reason, error: t.error };
      return unchained(await afterRetryScheduled(rt, a.ref, await scheduleRetry(rt.db, a.fence, retry), t.delayMs));
    }
    case "recheck_in_progress": {
      const recheck = { ...later, availableAt: a.now + t.delayMs, attempt: a.attempt, detail: t.detail };
      return unchained(await afterRetryScheduled(rt, a.ref, await scheduleInProgressRecheck(rt.db, a.fence, recheck), t.delayMs));
    }
    case "complete": {
      const { settle: completed, backfill } = await completion(a, t.output);
      return settle(rt, a, completed, backfill, t.output);
    }
    case "fail":
      return settle(rt, a, { state: "FAILED", error: t.error, output });
    case "park":
      return unchained(await afterParked(rt, a, t));
    case "await_permit":
      return unchained(await afterPermitWait(rt, a, t));
  }
}

/**
 * No permit (src/flow/permits.ts): park without it being an attempt (src/ledger/connector-permits.ts
 * `parkForPermit`), then — after the commit — the wake-up as a delayed message (whole seconds).
 */
async function afterPermitWait(rt: StepRuntime, a: Applying, t: Extract<Transition, { kind: "await_permit" }>): Promise<Decision> {
  const parked = await parkForPermit(rt.db, a.fence, { now: a.now, until: t.until, wait: t.wait });
  if (parked === "fenced-out") return { action: "ack", why: "permit wait fenced out: the step was taken over or cancelled" };
  await sendStepMessages(rt.queue, [a.ref], Math.max(1, Math.ceil((t.until - a.now) / 1000)), "permit");
  return { action: "ack", why: t.detail };
}

/**
 * Park the step (fenced), then — only after that committed — send its wake-up when the queue can
 * carry the delay; a longer sleep is woken by the cron's wake-up task (src/steps/cron.ts). A wait
 * whose event arrived while it ran is left claimable instead, and its message goes at once.
 */
async function afterParked(rt: StepRuntime, a: Applying, t: Extract<Transition, { kind: "park" }>): Promise<Decision> {
  const parked = await parkStep(rt.db, a.fence, {
    now: a.now,
    until: t.until,
    ...(t.waitKey ? { waitKey: t.waitKey } : {}),
    ...(t.mapItems ? { mapItems: t.mapItems } : {}),
  });
  if (parked === "fenced-out") return { action: "ack", why: "park fenced out: the step was taken over or cancelled" };
  if (parked === "event-arrived") {
    await sendStepMessages(rt.queue, [a.ref]);
    return { action: "ack", why: "an event arrived while the wait registered: resumed at once" };
  }
  const delayMs = t.until - a.now;
  // A MAP is woken by its last item's settle; its park's end is only a safety net, the cron's wake-up task's.
  if (delayMs <= MAX_QUEUE_DELAY_MS && !t.mapItems) await sendStepMessages(rt.queue, [a.ref], Math.ceil(delayMs / 1000));
  return { action: "ack", why: t.detail };
}

const unchained = (decision: Decision): Applied => ({ decision, next: null });

/** COMPLETED steps whose taken edges the settle records (see `SettleInput.backfill`). */
type Backfill = Array<{ vertexId: string; nextVertices: string[] }>;

/** The delayed message of a retry, sent only after the fenced transition committed. */
async function afterRetryScheduled(rt: StepRuntime, ref: StepRef, ours: boolean, delayMs: number): Promise<Decision> {
  if (!ours) return { action: "ack", why: "retry fenced out (recorded)" };
  await sendStepMessages(rt.queue, [ref], delaySeconds(delayMs));
  return { action: "ack", why: `retry scheduled in ${delayMs} ms` };
}

/** A completed step's settle: its taken edges (and those of unrecorded steps); an edge condition that fails fails the step. */
async function completion(
  a: Applying,
  output: unknown,
): Promise<{ settle: SettleOutcome; backfill: Array<{ vertexId: string; nextVertices: string[] }> }> {
  const { definition, context, unrecorded } = a.step;
  const after: ExpressionContext = { ...context, steps: { ...context.steps, [a.ref.vertexId]: output } };
  const backfill: Backfill = [];
  try {
    const nextVertices = await takenSuccessors(definition, a.ref.vertexId, after);
    // A COMPLETED step without recorded edges was written by ingress (the entry): record them
    // now, so the fan-in decisions in this batch can read them.
    for (const id of unrecorded) {
      if (id !== a.ref.vertexId) backfill.push({ vertexId: id, nextVertices: await takenSuccessors(definition, id, after) });
    }
    return { settle: { state: "COMPLETED", output: json(output), nextVertices }, backfill };
  } catch (error) {
    return { settle: { state: "FAILED", output: json(output), error: `an edge condition failed: ${errorMessage(error)}` }, backfill: [] };
  }
}

/**
 * Settle (fenced, one batch with the fan-in decisions and, within the chaining budget, the claim
 * of one successor), then the other successors' messages after the commit.
 */
async function settle(rt: StepRuntime, a: Applying, outcome: SettleOutcome, backfill: Backfill = [], output?: unknown): Promise<Applied> {
  // The message's own step has sent all but its settle: hold back only that while offering.
  rt.messageHold?.shrinkTo(settleQueries(a.step.definition));
  // A TRANSFORM successor that reads only what this invocation holds completes in this batch
  // (./inline-transform.ts) when the budget offers this settle a chained step: the inline run is
  // that step, and the claim is offered again, to what comes after it.
  const offered = outcome.state === "COMPLETED" ? (rt.budget?.offer(a.step.definition, outcome.nextVertices, a.now) ?? null) : null;
  const inline =
    offered && outcome.state === "COMPLETED" && outcome.nextVertices.length === 1 && offered.candidates.includes(outcome.nextVertices[0]!)
      ? await inlineTransform(a.step.definition, a.run, a.ref.vertexId, output, outcome.nextVertices, a.known)
      : null;
  // The inline run sends no query of its own (it rides in the settle batch): its held queries go back at once.
  if (inline) rt.budget?.ran(offered!);
  const chain = inline ? (rt.budget?.offer(a.step.definition, inline.nextVertices, a.now) ?? null) : offered;
  const result = await settleAndDispatch(rt.db, {
    fence: a.fence,
    now: a.now,
    outcome,
    request: a.request,
    response: a.response,
    responseInOutput: answerIsOutput(a.response, output),
    backfill,
    descendants: outcome.state === "COMPLETED" ? descendantsInOrder(a.step.definition, a.ref.vertexId) : [],
    chain,
    inline,
  }).catch((error: unknown) => {
    if (chain) rt.budget?.unclaimed(chain);
    if (inline) rt.budget?.notTaken();
    throw error;
  });
  rt.messageHold?.release();
  if (chain && !result.chained) rt.budget?.unclaimed(chain);
  // The inline run was this settle's chained step: it stays counted if the batch took it.
  if (inline && !result.inlined) rt.budget?.notTaken();
  if (!result.settled) {
    log.warn("step.fenced_out", { message: "late result fenced out and recorded", ...a.fence, outcome: outcome.state });
    return unchained({ action: "ack", why: "fenced out (recorded)" });
  }
  if (outcome.state === "FAILED") log.warn("step.failed", { ...a.fence, attempt: a.attempt, error: outcome.error });
  if (result.executionStatus === "COMPENSATING") await startCompensation(rt, a.ref.executionId);
  await sendStepMessages(
    rt.queue,
    result.dispatched.map((vertexId) => ({ executionId: a.ref.executionId, vertexId })),
  );
  await notifyExecutionFailed(rt.db, rt.queue, a.ref.executionId, result.executionStatus);
  const decision: Decision = { action: "ack", why: `settled ${outcome.state}` };
  if (!result.chained) return { decision, next: null };
  const outputs = new Map(a.known.outputs).set(a.ref.vertexId, asStored(output));
  if (inline && result.inlined) outputs.set(inline.vertexId, asStored(inline.value));
  const known: KnownInputs = { ...a.known, outputs };
  return { decision, next: chainedStep(a.run, result.chained, a.now, known, chain!) };
}

/** A Gateway's output is its answer (src/steps/gateway/classify.ts): the same headers and body objects. */
function answerIsOutput(response: ResponseSummary | null, output: unknown): boolean {
  if (response === null || output === null || typeof output !== "object") return false;
  const o = output as { headers?: unknown; body?: unknown };
  return o.headers === response.headers && o.body === response.body;
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
  if (result.executionStatus === "COMPENSATING") await startCompensation(rt, fence.executionId);
  await notifyExecutionFailed(rt.db, rt.queue, fence.executionId, result.executionStatus);
  return { action: "ack", why: result.settled ? "settled FAILED" : "fenced out (recorded)" };
}
