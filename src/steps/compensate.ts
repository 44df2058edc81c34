/**
 * One undo step of a compensation, end to end (SPEC section 18, docs/steps.md "Compensation"): the
 * step's four phases over its `work_items` row — claim (`claimUndoAndLoad`), execute (the step's
 * `compensate` as a Gateway call with `output` = the undone step's output beside `payload` and
 * `steps`; its key computed at its first attempt, refused when equal to the key the step sent,
 * persisted before the first send and re-sent by every later attempt), decide (`decide` with the
 * undo's retry policy, default the step's), apply (a retry, or the undo settle that burns the
 * undone key and starts the next undo — one at a time — or ends the compensation).
 */
import { DEFAULT_RETRY, WorkflowDefinition as WorkflowDefinitionSchema } from "../definitions/schema";
import type { GatewayConfig, GatewayVertex, WorkflowDefinition } from "../definitions/schema";
import { STEP_INPUTS_VERSION } from "../definitions/step-inputs";
import { isIdempotencyKeyHeader } from "../definitions/expression-sites";
import {
  burntKeyReason,
  claimUndoAndLoad,
  dispatchedUndos,
  extendRowLease,
  MAX_STEP_INPUT_BYTES,
  parseKeySends,
  pendingCompensationFailedNotifications,
  persistRowKey,
  recordRowKeySend,
  scheduleRowInProgressRecheck,
  scheduleRowRetry,
  settleUndo,
  undoKeyFence,
  type ClaimedStep,
  type StepInputs,
  type UndoFence,
  type UndoRef,
  type UndoRun,
  type UndoSettleOutcome,
} from "../ledger";
import { isoTimeText } from "../lib/iso-time";
import { sendNotificationMessages } from "../notifications";
import { errorMessage, log } from "../lib/log";
import { setOwnMember } from "../lib/own-member";
import { secretLookup } from "../secrets/resolve";
import { parseSealedSecrets } from "../secrets/store";
import { keyForgetHorizonMs, keyMemoryBucket } from "../keys/memory";
import { recallKeySend } from "../keys/recall";
import { contextOf } from "./chain";
import { decide, overClaimBudget, type ClaimFacts } from "./decide";
import type { StepQueue } from "./runtime";
import { mustVerify, runGateway } from "./gateway";
import { withPermit } from "./permit-gate";
import { vertexOf } from "./graph";
import { itemContext } from "./map";
import { withHeartbeat } from "./heartbeat";
import type { RunOutcome } from "./outcome";
import type { ExpressionContext } from "./plan";
import { dropsIfNotClaimable, type Delivery } from "./redelivery";
import { delaySeconds } from "./retry-policy";
import type { Decision } from "./run-step";
import type { StepRuntime } from "./runtime";

/** The messages of undo steps (`{ executionId, vertexId, undo }`), after the batch that dispatched them committed. */
export async function sendUndoMessages(queue: StepQueue, undos: readonly UndoRef[], delaySecondsValue = 0): Promise<boolean> {
  if (undos.length === 0) return true;
  try {
    await queue.sendBatch(
      undos.map((u) => ({
        body: { executionId: u.executionId, vertexId: u.vertexId, undo: u.place },
        ...(delaySecondsValue > 0 ? { delaySeconds: delaySecondsValue } : {}),
      })),
    );
    return true;
  } catch (error) {
    log.error("step.send_failed", {
      message: "undo message send failed after commit; the reaper will re-send",
      error: errorMessage(error),
    });
    return false;
  }
}

/** After the settle that decided COMPENSATING: the first undo's message (one read, on this rare path only). */
export async function startCompensation(rt: StepRuntime, executionId: string): Promise<void> {
  await sendUndoMessages(rt.queue, await dispatchedUndos(rt.db, executionId));
}

/** The undo step a queue message names: claim it, run it, settle it. */
export async function runUndo(
  ref: UndoRef,
  rt: StepRuntime,
  delivery: Delivery = { messageId: "(direct)", attempts: 1 },
): Promise<Decision> {
  const claimedAt = rt.now();
  const drop = dropsIfNotClaimable(delivery);
  const { claimed, run, inputs } = await claimUndoAndLoad(rt.db, ref, claimedAt, rt.leaseMs, {
    message: `message ${delivery.messageId} (delivery ${delivery.attempts})`,
    dropIfWaiting: drop,
    inputs: { maxBytes: MAX_STEP_INPUT_BYTES, analysisVersion: STEP_INPUTS_VERSION },
  });
  if (!run) return { action: "missing", why: `unknown execution ${ref.executionId}` };
  if (!claimed) return whyNotClaimed(run, claimedAt, drop);
  return runClaimedUndo(rt, ref, run, claimed, inputs);
}

function whyNotClaimed(run: UndoRun, now: number, drop: boolean): Decision {
  switch (run.undoState) {
    case null:
      return { action: "poison", why: `execution ${run.executionId} has no such undo step` };
    case "COMPLETED":
    case "FAILED":
    case "CANCELLED":
      return { action: "ack", why: `undo already ${run.undoState}` };
    case "PENDING":
      return { action: "ack", why: "undo not started: the undo before it starts it" };
    case "EXECUTING":
      if (drop) return { action: "drop", why: "lease held by another worker; the reaper re-dispatches the undo if the lease expires" };
      return { action: "retry", delayMs: Math.max(1000, (run.leaseUntil ?? now) - now), why: "lease held by another worker" };
    case "DISPATCHED":
      if (drop) return { action: "drop", why: "not due yet; the reaper re-sends the undo once it is overdue" };
      return { action: "retry", delayMs: Math.max(1000, (run.availableAt ?? now) - now), why: "not due yet (retry backoff)" };
  }
}

const definitions = new Map<string, WorkflowDefinition>();

function definitionOf(run: UndoRun): WorkflowDefinition {
  const cacheKey = `${run.workspace}/${run.workflowId}/${run.version}`;
  let definition = definitions.get(cacheKey);
  if (!definition) {
    definition = WorkflowDefinitionSchema.parse(JSON.parse(run.definitionJson));
    if (definitions.size > 500) definitions.delete(definitions.keys().next().value as string);
    definitions.set(cacheKey, definition);
  }
  return definition;
}

/**
 * The undo call as a Gateway vertex (the undone step's id): the step's `compensate` over the step's
 * own settings — `url`, `timeoutMs`, `retry` and `maxResponseBytes` default to the step's, its
 * headers are the step's (their secrets: a destination's auth) without the step's key header, with
 * the undo's own on top. Its connector (so its limits and permits, src/steps/permit-gate.ts): the one
 * the save resolved the undo through (`compensate.connector`), else the step's when the undo calls
 * the step's own URL; an undo with its own `url` leaves the connector. Its verify probe is its own
 * (`compensate.verify`), never the step's. Never `clientErrorMode: complete`.
 */
export function undoVertex(step: GatewayVertex): GatewayVertex | null {
  const undo = step.config.compensate;
  if (!undo) return null;
  const stepKeyHeader = step.config.idempotencyKey?.header;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(step.config.headers ?? {})) {
    if (isIdempotencyKeyHeader(name) || (stepKeyHeader && name.toLowerCase() === stepKeyHeader.toLowerCase())) continue;
    setOwnMember(headers, name, value);
  }
  for (const [name, value] of Object.entries(undo.headers ?? {})) setOwnMember(headers, name, value);
  const config: GatewayConfig = {
    method: undo.method,
    url: undo.url ?? step.config.url,
    headers,
    ...(undo.query ? { query: undo.query } : {}),
    ...(undo.body !== undefined ? { body: undo.body } : {}),
    timeoutMs: undo.timeoutMs ?? step.config.timeoutMs,
    ...(undo.idempotencyKey ? { idempotencyKey: undo.idempotencyKey } : {}),
    retry: undo.retry ?? step.config.retry ?? DEFAULT_RETRY,
    clientErrorMode: "fail",
    conflictAsProcessed: false,
    maxResponseBytes: step.config.maxResponseBytes,
    ...(undo.verify ? { verify: undo.verify } : {}),
  };
  const connector = undo.connector ?? (undo.url === undefined ? step.config.connector : undefined);
  if (connector !== undefined) config.connector = connector;
  return { id: step.id, type: "GATEWAY", config };
}

interface Prepared {
  vertex: GatewayVertex;
  context: ExpressionContext;
}

function prepare(ref: UndoRef, run: UndoRun, inputs: StepInputs | null): Prepared | { unrunnable: string } {
  let definition: WorkflowDefinition;
  try {
    definition = definitionOf(run);
  } catch (error) {
    return { unrunnable: `the execution's pinned workflow version ${run.version} can no longer be read: ${errorMessage(error)}` };
  }
  const step = vertexOf(definition, ref.vertexId);
  // A MAP item's undo: its MAP's item step (a GATEWAY) declares the undo, run with the item under its name and `index`.
  const inner: GatewayVertex | null =
    step?.type === "GATEWAY"
      ? step
      : step?.type === "MAP" && step.config.step.type === "GATEWAY" && run.undoItem !== null
        ? ({ id: step.id, type: "GATEWAY", config: step.config.step.config } as GatewayVertex)
        : null;
  const vertex = inner ? undoVertex(inner) : null;
  if (!vertex) return { unrunnable: `vertex ${ref.vertexId} declares no compensate in the execution's pinned definition` };
  if (!inputs) return { unrunnable: "the undo's inputs could not be read after its claim" };
  if (!inputs.withinBound) {
    return { unrunnable: `the undone step's inputs are ${inputs.inputBytes} bytes, over the ${MAX_STEP_INPUT_BYTES}-byte bound` };
  }
  let output: unknown;
  try {
    output = JSON.parse(run.stepOutputJson ?? "null") as unknown;
  } catch {
    return { unrunnable: "the undone step's stored output is not JSON" };
  }
  const execution = { id: ref.executionId, workflowId: run.workflowId, trigger: run.triggerKind };
  let base = contextOf(inputs, run.entryVertexId, execution);
  if (step?.type === "MAP" && run.undoItem !== null) {
    let item: unknown;
    try {
      item = JSON.parse(run.itemJson ?? "null") as unknown;
    } catch {
      return { unrunnable: "the undone item's persisted value is not JSON" };
    }
    base = itemContext(base, step.config.as, item, run.undoItem);
  }
  const context = { ...base } as ExpressionContext & Record<string, unknown>;
  setOwnMember(context, "output", output);
  return { vertex, context };
}

async function runClaimedUndo(
  rt: StepRuntime,
  ref: UndoRef,
  run: UndoRun,
  claimed: ClaimedStep,
  inputs: StepInputs | null,
): Promise<Decision> {
  const fence: UndoFence = { ...ref, epoch: claimed.epoch };
  const prepared = prepare(ref, run, inputs);
  if ("unrunnable" in prepared) return settle(rt, fence, { state: "FAILED", error: prepared.unrunnable, output: null }, null, null);
  const policy = prepared.vertex.config.retry ?? DEFAULT_RETRY;
  const facts: ClaimFacts = { attempt: claimed.attempt, retryBase: claimed.retryBase, inProgressSince: run.inProgressSince };
  const outcome = overClaimBudget(facts, policy) ?? (await execute(rt, fence, run, claimed, prepared));
  await rt.afterRun?.(undoKeyFence(fence));
  const now = rt.now();
  const t = decide(outcome, facts, policy, now, rt.random);
  const request = outcome.request ? JSON.stringify(outcome.request) : null;
  const response = outcome.response ?? null;
  const output = "output" in t && t.output !== undefined ? JSON.stringify(t.output ?? null) : null;
  switch (t.kind) {
    case "retry": {
      const ours = await scheduleRowRetry(rt.db, undoKeyFence(fence), {
        now,
        availableAt: now + t.delayMs,
        delayReason: t.reason,
        error: t.error,
        request,
        response,
        output,
      });
      return afterRetry(rt, ref, ours, t.delayMs);
    }
    case "recheck_in_progress": {
      const ours = await scheduleRowInProgressRecheck(rt.db, undoKeyFence(fence), {
        now,
        availableAt: now + t.delayMs,
        attempt: claimed.attempt,
        detail: t.detail,
        request,
        response,
        output,
      });
      return afterRetry(rt, ref, ours, t.delayMs);
    }
    case "complete":
      return settle(rt, fence, { state: "COMPLETED", output: JSON.stringify(t.output ?? null) }, request, response);
    case "fail":
      return settle(rt, fence, { state: "FAILED", error: t.error, output }, request, response);
    default: {
      // An undo never parks; a wait (a connector's permit) is asked again later, not counted.
      const until = "until" in t ? t.until : now + 1000;
      const ours = await scheduleRowInProgressRecheck(rt.db, undoKeyFence(fence), {
        now,
        availableAt: Math.max(until, now + 1000),
        attempt: claimed.attempt,
        detail: `waiting until ${isoTimeText(until)}`,
        request,
        response,
        output,
      });
      return afterRetry(rt, ref, ours, Math.max(until - now, 1000));
    }
  }
}

async function afterRetry(rt: StepRuntime, ref: UndoRef, ours: boolean, delayMs: number): Promise<Decision> {
  if (!ours) return { action: "ack", why: "undo retry fenced out (recorded)" };
  await sendUndoMessages(rt.queue, [ref], delaySeconds(delayMs));
  return { action: "ack", why: `undo retry scheduled in ${delayMs} ms` };
}

/** The undo call once for this claim, under the undo's heartbeat; its key refused when it is the undone step's own. */
async function execute(rt: StepRuntime, fence: UndoFence, run: UndoRun, claimed: ClaimedStep, p: Prepared): Promise<RunOutcome> {
  const rowFence = undoKeyFence(fence);
  const policy = p.vertex.config.retry ?? DEFAULT_RETRY;
  return withHeartbeat(
    rt,
    rowFence,
    rt.leaseMs,
    () =>
      // Through a limited connector: the undo's permit first, as a step's and a MAP item's (src/steps/permit-gate.ts),
      // its row's fence and lease; a refusal comes back as `awaiting_permit` (asked again later, not an attempt).
      withPermit(rt, { workspace: run.workspace }, rowFence, p.vertex, policy, () =>
        runGateway(p.vertex, p.context, {
          env: rt.env,
          secret: secretLookup({
            workspace: run.workspace,
            stored: parseSealedSecrets(run.sealedSecretsJson),
            env: rt.env as unknown as Record<string, unknown>,
          }),
          fetch: rt.fetch,
          now: rt.now,
          persistedKey: claimed.idempotencyKey,
          keySends: parseKeySends(run.keySendsJson),
          stepCreatedAt: run.undoCreatedAt ?? 0,
          // Its own probe (`compensate.verify`) before a re-attempt, as any Gateway call's: a retry, a takeover, an operator retry
          // (they continue the attempt counter), or the undo of an execution started over from another (the old one's may have run).
          reattempt: mustVerify({ attempt: claimed.attempt, startedOverFrom: run.startedOverFrom }),
          refuseKey: (key) =>
            key === run.stepKey
              ? `the undo's key ${key} is the key step ${fence.vertexId} sent: the destination would replay the call it undoes; ` +
                "give compensate its own key (not retried)"
              : null,
          persistKey: (key, destination, guarded) => persistRowKey(rt.db, rowFence, key, rt.now(), destination, guarded),
          explainUnpersisted: (key) => burntKeyReason(rt.db, run.workspace, key),
          recordSend: (destination, at, guarded) => recordRowKeySend(rt.db, rowFence, at, destination, guarded),
          recallColdSend: (key, destination, hot) =>
            recallKeySend(
              { db: rt.db, bucket: keyMemoryBucket(rt.env), workspace: run.workspace, horizonMs: keyForgetHorizonMs(rt.env), now: rt.now },
              key,
              destination,
              hot,
              run.undoCreatedAt ?? 0,
            ),
        }),
      ),
    (now, leaseMs) => extendRowLease(rt.db, rowFence, now, leaseMs),
  );
}

async function settle(
  rt: StepRuntime,
  fence: UndoFence,
  outcome: UndoSettleOutcome,
  request: string | null,
  response: RunOutcome["response"] | null,
): Promise<Decision> {
  const result = await settleUndo(rt.db, { fence, now: rt.now(), outcome, request, response: response ?? null });
  if (!result.settled) {
    log.warn("step.fenced_out", { message: "late undo result fenced out and recorded", ...fence, outcome: outcome.state });
    return { action: "ack", why: "fenced out (recorded)" };
  }
  if (outcome.state === "FAILED") log.warn("step.failed", { ...fence, error: outcome.error });
  if (result.next) await sendUndoMessages(rt.queue, [result.next]);
  // The `execution.compensation_failed` row its trigger wrote with the failure (migrations/0034): its message now
  // (one read, on this rare path only; a lost one is re-sent by the notifications cron).
  if (result.executionStatus === "COMPENSATION_FAILED") {
    try {
      await sendNotificationMessages(rt.queue, await pendingCompensationFailedNotifications(rt.db, fence.executionId));
    } catch (error) {
      log.warn("notifications.send_failed", {
        executionId: fence.executionId,
        error: errorMessage(error),
        message: "the cron re-sends it",
      });
    }
  }
  return { action: "ack", why: `undo settled ${outcome.state}` };
}
