/**
 * One MAP item, end to end (docs/steps.md "MAP"): the step's four phases over the item's row —
 * claim (the step's claim batch over the item, src/ledger `claimItemAndLoad`), execute (the MAP's
 * inner GATEWAY or TRANSFORM with the item under its name and `index`; a Gateway item's key
 * computed at its first attempt, persisted before its first send and re-sent by every later one),
 * decide (`decide`, the inner step's retry policy), apply (a retry, or the item settle that starts
 * the next item — claimed for this invocation when its chaining budget offers — and wakes the MAP
 * when its items are done; the woken MAP is claimed here at once, no message).
 */
import { DEFAULT_RETRY, EXPRESSION_PREFIX, WorkflowDefinition as WorkflowDefinitionSchema } from "../definitions/schema";
import type { GatewayVertex, MapVertex, RetryPolicy, TransformVertex, WorkflowDefinition } from "../definitions/schema";
import { STEP_INPUTS_VERSION } from "../definitions/step-inputs";
import { evaluate } from "../expressions/evaluate";
import {
  burntKeyReason,
  claimItemAndLoad,
  extendRowLease,
  itemKeyFence,
  MAX_STEP_INPUT_BYTES,
  parseKeySends,
  persistRowKey,
  recordRowKeySend,
  scheduleRowInProgressRecheck,
  scheduleRowRetry,
  settleItem,
  type ClaimedStep,
  type ItemFence,
  type ItemRef,
  type ItemRun,
  type ItemSettleOutcome,
  type StepInputs,
} from "../ledger";
import { ownMember, setOwnMember, isJsonObject } from "../lib/own-member";
import { errorMessage, log } from "../lib/log";
import { secretLookup } from "../secrets/resolve";
import { parseSealedSecrets } from "../secrets/store";
import { contextOf, type BudgetOffer } from "./chain";
import { decide, overClaimBudget, type ClaimFacts } from "./decide";
import { sendItemMessages } from "./dispatch";
import { mustVerify, runGateway } from "./gateway";
import { vertexOf } from "./graph";
import { withHeartbeat } from "./heartbeat";
import { itemContext } from "./map";
import type { RunOutcome } from "./outcome";
import type { ExpressionContext } from "./plan";
import { dropsIfNotClaimable, type Delivery } from "./redelivery";
import { delaySeconds } from "./retry-policy";
import { EARLY_WAKE_BOUNCE_MS, MAX_OUTPUT_BYTES, runStep, type Decision } from "./run-step";
import type { StepRuntime } from "./runtime";
import { runTransform } from "./transform";
import { isoTimeText } from "../lib/iso-time";
import { keyForgetHorizonMs, keyMemoryBucket } from "../keys/memory";
import { withPermit } from "./permit-gate";
import { parkItemForPermit } from "../ledger/connector-permits";
import { recallKeySend } from "../keys/recall";

/** An item in hand: the claim's result, or a chained claim's (the settle before it claimed it). */
interface ClaimedItem {
  ref: ItemRef;
  run: ItemRun;
  claimed: ClaimedStep;
  /** The lease this claim holds: a heartbeat extends it by this much. */
  leaseMs: number;
  /** The budget's offer the claim took (null for the message's own item). */
  offer: BudgetOffer | null;
}

/** The item a queue message names: claim it, run it and the items its settles chain, then the MAP if they woke it. */
export async function runItem(
  ref: ItemRef,
  rt: StepRuntime,
  delivery: Delivery = { messageId: "(direct)", attempts: 1 },
): Promise<Decision> {
  const claimedAt = rt.now();
  const drop = dropsIfNotClaimable(delivery);
  const { claimed, run, inputs } = await claimItemAndLoad(rt.db, ref, claimedAt, rt.leaseMs, {
    message: `message ${delivery.messageId} (delivery ${delivery.attempts})`,
    dropIfWaiting: drop,
    permitWake: delivery.permitWake === true,
    inputs: { maxBytes: MAX_STEP_INPUT_BYTES, analysisVersion: STEP_INPUTS_VERSION },
  });
  if (!run) return { action: "missing", why: `unknown execution ${ref.executionId}` };
  if (!claimed) return whyNotClaimed(run, claimedAt, drop);
  let step: ClaimedItem | null = { ref, run, claimed, leaseMs: rt.leaseMs, offer: null };
  let decision: Decision | null = null;
  let woken = false;
  while (step) {
    const current: ClaimedItem = step;
    try {
      const done = await runClaimedItem(rt, current, inputs);
      decision ??= done.decision;
      woken ||= done.mapWoken;
      step = done.next;
    } catch (error) {
      // The message's own item: the consumer retries the message after the lease. A chained one
      // stays EXECUTING under its lease; the reaper re-dispatches it.
      if (current.offer === null) throw error;
      log.error("step.crashed", {
        message: "chained item crashed; the reaper re-dispatches it after its lease",
        ...current.ref,
        error: errorMessage(error),
      });
      step = null;
    } finally {
      if (current.offer) rt.budget?.ran(current.offer);
    }
  }
  // The last item's settle woke the MAP: claim it here (its own fenced claim decides it once).
  if (woken) await runWokenMap(rt, { executionId: ref.executionId, vertexId: ref.vertexId });
  return decision ?? { action: "ack", why: "item settled" };
}

/** Claim and run the MAP its items' last settle woke, in this invocation; a crash is left to the cron's wake-up task. */
async function runWokenMap(rt: StepRuntime, map: { executionId: string; vertexId: string }): Promise<void> {
  const hold = rt.budget?.reserve(40);
  try {
    // A miss (another worker claimed it first) needs nothing: that worker decides it.
    await runStep(map, { ...rt, messageHold: undefined });
  } catch (error) {
    log.error("step.crashed", { message: "woken MAP crashed; the wake-up task resumes it", ...map, error: errorMessage(error) });
  } finally {
    hold?.release();
  }
}

function whyNotClaimed(run: ItemRun, now: number, drop: boolean): Decision {
  switch (run.itemState) {
    case null:
      return { action: "poison", why: `execution ${run.executionId} has no such item` };
    case "COMPLETED":
    case "FAILED":
    case "CANCELLED":
      return { action: "ack", why: `item already ${run.itemState}` };
    case "PENDING":
      return { action: "ack", why: "item not started: its MAP starts it" };
    case "EXECUTING":
      // Parked for a connector's permit: a wake-up a little early is bounced to its time, a redundant one acked (as a step's).
      if (run.parkedUntil !== null && run.parkedUntil > now && run.parkedUntil - now <= EARLY_WAKE_BOUNCE_MS) {
        return {
          action: "retry",
          delayMs: run.parkedUntil - now,
          why: `a wake-up early by ${run.parkedUntil - now} ms: retried at its time`,
        };
      }
      if (run.parkedUntil !== null) return { action: "ack", why: `the item is parked until ${isoTimeText(run.parkedUntil)}` };
      if (drop) return { action: "drop", why: "lease held by another worker; the reaper re-dispatches the item if the lease expires" };
      return { action: "retry", delayMs: Math.max(1000, (run.leaseUntil ?? now) - now), why: "lease held by another worker" };
    case "DISPATCHED":
      if (drop) return { action: "drop", why: "not due yet; the reaper re-sends the item once it is overdue" };
      return { action: "retry", delayMs: Math.max(1000, (run.availableAt ?? now) - now), why: "not due yet (retry backoff)" };
  }
}

const definitions = new Map<string, WorkflowDefinition>();

function definitionOf(run: ItemRun): WorkflowDefinition {
  const cacheKey = `${run.workspace}/${run.workflowId}/${run.version}`;
  let definition = definitions.get(cacheKey);
  if (!definition) {
    definition = WorkflowDefinitionSchema.parse(JSON.parse(run.definitionJson));
    if (definitions.size > 500) definitions.delete(definitions.keys().next().value as string);
    definitions.set(cacheKey, definition);
  }
  return definition;
}

/** The item's inner step as a vertex: the MAP's id, the step's type and config. */
type InnerStep = GatewayVertex | TransformVertex;

interface PreparedItem {
  map: MapVertex;
  inner: InnerStep;
  context: ExpressionContext;
  definition: WorkflowDefinition;
}

function prepare(c: ClaimedItem, inputs: StepInputs | null): PreparedItem | { unrunnable: string } {
  let definition: WorkflowDefinition;
  try {
    definition = definitionOf(c.run);
  } catch (error) {
    return { unrunnable: `the execution's pinned workflow version ${c.run.version} can no longer be read: ${errorMessage(error)}` };
  }
  const map = vertexOf(definition, c.ref.vertexId);
  if (!map || map.type !== "MAP") return { unrunnable: `vertex ${c.ref.vertexId} is not a MAP of the execution's pinned definition` };
  if (!inputs) return { unrunnable: "the item's inputs could not be read after its claim" };
  if (!inputs.withinBound) {
    return {
      unrunnable:
        `the item's inputs (its MAP's) are ${inputs.inputBytes} bytes, ` +
        `over the ${MAX_STEP_INPUT_BYTES}-byte bound on what one step may load`,
    };
  }
  let item: unknown;
  try {
    item = JSON.parse(c.run.itemJson ?? "null") as unknown;
  } catch {
    return { unrunnable: "the item's persisted value is not JSON" };
  }
  const execution = { id: c.ref.executionId, workflowId: c.run.workflowId, trigger: c.run.triggerKind };
  const context = itemContext(contextOf(inputs, c.run.entryVertexId, execution), map.config.as, item, c.ref.item);
  const inner = { id: map.id, type: map.config.step.type, config: map.config.step.config } as InnerStep;
  return { map, inner, context, definition };
}

const policyOf = (inner: InnerStep): RetryPolicy | null => (inner.type === "GATEWAY" ? (inner.config.retry ?? DEFAULT_RETRY) : null);

interface ItemDone {
  decision: Decision;
  next: ClaimedItem | null;
  mapWoken: boolean;
}

async function runClaimedItem(rt: StepRuntime, c: ClaimedItem, inputs: StepInputs | null): Promise<ItemDone> {
  const fence: ItemFence = { ...c.ref, epoch: c.claimed.epoch };
  const prepared = prepare(c, inputs);
  if ("unrunnable" in prepared) {
    // Settled FAILED unrun (not a crash to retry): MAP settings unknown, so it starts nothing and stops nothing.
    return settle(rt, c, fence, null, { state: "FAILED", error: prepared.unrunnable, output: null }, null, null);
  }
  const policy = policyOf(prepared.inner);
  const facts: ClaimFacts = { attempt: c.claimed.attempt, retryBase: c.claimed.retryBase, inProgressSince: c.run.inProgressSince };
  const outcome = boundOutput(overClaimBudget(facts, policy) ?? (await execute(rt, c, fence, prepared)));
  await rt.afterRun?.(itemKeyFence(fence));
  const now = rt.now();
  const t = decide(outcome, facts, policy, now, rt.random);
  const request = outcome.request ? JSON.stringify(outcome.request) : null;
  const response = outcome.response ?? null;
  const output = "output" in t && t.output !== undefined ? JSON.stringify(t.output ?? null) : null;
  switch (t.kind) {
    case "retry": {
      const ours = await scheduleRowRetry(rt.db, itemKeyFence(fence), {
        now,
        availableAt: now + t.delayMs,
        delayReason: t.reason,
        error: t.error,
        request,
        response,
        output,
      });
      return afterRetry(rt, c.ref, ours, t.delayMs);
    }
    case "recheck_in_progress": {
      const ours = await scheduleRowInProgressRecheck(rt.db, itemKeyFence(fence), {
        now,
        availableAt: now + t.delayMs,
        attempt: c.claimed.attempt,
        detail: t.detail,
        request,
        response,
        output,
      });
      return afterRetry(rt, c.ref, ours, t.delayMs);
    }
    case "complete": {
      const collected = await collect(prepared, t.output);
      if ("error" in collected) {
        return settle(
          rt,
          c,
          fence,
          prepared,
          { state: "FAILED", error: collected.error, output: JSON.stringify(t.output ?? null) },
          request,
          response,
        );
      }
      const settled: ItemSettleOutcome = { state: "COMPLETED", output: JSON.stringify(t.output ?? null), collected: collected.json };
      return settle(rt, c, fence, prepared, settled, request, response);
    }
    case "fail":
      return settle(rt, c, fence, prepared, { state: "FAILED", error: t.error, output }, request, response);
    case "await_permit": {
      // No permit of its limited connector (src/steps/permit-gate.ts): the item's row parks — not an attempt,
      // nothing counted, no attempt row — and its wake-up goes after the commit (a release may wake it sooner).
      const parked = await parkItemForPermit(rt.db, fence, { now, until: t.until, wait: t.wait });
      if (parked === "fenced-out") {
        return {
          decision: { action: "ack", why: "permit wait fenced out: the item was taken over or cancelled" },
          next: null,
          mapWoken: false,
        };
      }
      await sendItemMessages(rt.queue, [c.ref], Math.max(1, Math.ceil((t.until - now) / 1000)), "permit");
      return { decision: { action: "ack", why: t.detail }, next: null, mapWoken: false };
    }
    default: {
      // An item never parks otherwise (no DELAY or wait inside a MAP): asked again later, not counted.
      const until = "until" in t ? t.until : now + 1000;
      const ours = await scheduleRowInProgressRecheck(rt.db, itemKeyFence(fence), {
        now,
        availableAt: Math.max(until, now + 1000),
        attempt: c.claimed.attempt,
        detail: `waiting until ${isoTimeText(until)}`,
        request,
        response,
        output,
      });
      return afterRetry(rt, c.ref, ours, Math.max(until - now, 1000));
    }
  }
}

async function afterRetry(rt: StepRuntime, ref: ItemRef, ours: boolean, delayMs: number): Promise<ItemDone> {
  if (!ours) return { decision: { action: "ack", why: "item retry fenced out (recorded)" }, next: null, mapWoken: false };
  await sendItemMessages(rt.queue, [ref], delaySeconds(delayMs));
  return { decision: { action: "ack", why: `item retry scheduled in ${delayMs} ms` }, next: null, mapWoken: false };
}

/** Run the inner step once for this claim: a Gateway call under the item's heartbeat, or a transform. */
async function execute(rt: StepRuntime, c: ClaimedItem, fence: ItemFence, p: PreparedItem): Promise<RunOutcome> {
  if (p.inner.type === "TRANSFORM") return runTransform(p.inner, p.context);
  const gateway = p.inner;
  const rowFence = itemKeyFence(fence);
  return withHeartbeat(
    rt,
    rowFence,
    c.leaseMs,
    () =>
      // Through a limited connector: the item's permit first, as a step's (src/steps/permit-gate.ts) — its row's fence and lease.
      withPermit(rt, c.run, rowFence, gateway, gateway.config.retry ?? DEFAULT_RETRY, () =>
        runGateway(gateway, p.context, {
          env: rt.env,
          secret: secretLookup({
            workspace: c.run.workspace,
            stored: parseSealedSecrets(c.run.sealedSecretsJson),
            env: rt.env as unknown as Record<string, unknown>,
          }),
          fetch: rt.fetch,
          now: rt.now,
          persistedKey: c.claimed.idempotencyKey,
          keySends: parseKeySends(c.run.keySendsJson),
          stepCreatedAt: c.run.itemCreatedAt ?? 0,
          reattempt: mustVerify({ attempt: c.claimed.attempt, startedOverFrom: c.run.startedOverFrom }),
          persistKey: (key, destination, guarded) => persistRowKey(rt.db, rowFence, key, rt.now(), destination, guarded),
          explainUnpersisted: (key) => burntKeyReason(rt.db, c.run.workspace, key),
          recordSend: (destination, at, guarded) => recordRowKeySend(rt.db, rowFence, at, destination, guarded),
          // The retention guard's cold lookup (docs/history.md "Key memory: hot and cold"), as for a step.
          recallColdSend: (key, destination, hot) =>
            recallKeySend(
              {
                db: rt.db,
                bucket: keyMemoryBucket(rt.env),
                workspace: c.run.workspace,
                horizonMs: keyForgetHorizonMs(rt.env),
                now: rt.now,
              },
              key,
              destination,
              hot,
              c.run.itemCreatedAt ?? 0,
            ),
        }),
      ),
    (now, leaseMs) => extendRowLease(rt.db, rowFence, now, leaseMs),
  );
}

/** An outcome whose output is over MAX_OUTPUT_BYTES fails the item instead (src/steps/run-step.ts's bound). */
function boundOutput(outcome: RunOutcome): RunOutcome {
  if (outcome.output === undefined) return outcome;
  const bytes = utf8.encode(JSON.stringify(outcome.output ?? null)).byteLength;
  if (bytes <= MAX_OUTPUT_BYTES) return outcome;
  return {
    kind: "failed",
    ...(outcome.request ? { request: outcome.request } : {}),
    ...(outcome.response ? { response: outcome.response } : {}),
    error: `the item's output is ${bytes} bytes of JSON, over the ${MAX_OUTPUT_BYTES}-byte bound; it was not stored`,
  };
}

const utf8 = new TextEncoder();

/**
 * What the item passes on: `collect` over the item step's output (its members at the root: a
 * Gateway's `status`, `headers`, `body`, `idempotencyKey`) beside the item, `index`, `payload`,
 * `steps`; default a Gateway item's `{ status, id }` (`id` = `body.id` when present), a TRANSFORM
 * item's output. Over `maxCollectBytes`, or a `collect` that throws, fails the item (not retried).
 */
export async function collect(p: PreparedItem, output: unknown): Promise<{ json: string } | { error: string }> {
  const { collect: expression, maxCollectBytes } = p.map.config;
  let value: unknown;
  if (expression !== undefined) {
    const root: Record<string, unknown> = {};
    if (isJsonObject(output)) for (const name of Object.keys(output)) setOwnMember(root, name, ownMember(output, name));
    for (const name of Object.keys(p.context)) setOwnMember(root, name, ownMember(p.context, name));
    try {
      value = await evaluate(expression.slice(EXPRESSION_PREFIX.length), root);
    } catch (error) {
      return { error: `map ${p.map.id}: \`collect\` failed: ${errorMessage(error)}; not retried` };
    }
  } else if (p.inner.type === "GATEWAY" && isJsonObject(output)) {
    const body = ownMember(output, "body");
    const id = isJsonObject(body) ? ownMember(body, "id") : undefined;
    value = { status: ownMember(output, "status") ?? null, ...(id !== undefined ? { id } : {}) };
  } else {
    value = output;
  }
  const json = JSON.stringify(value ?? null);
  const bytes = utf8.encode(json).byteLength;
  if (bytes > maxCollectBytes) {
    return {
      error:
        `map ${p.map.id}: the collected value is ${bytes} bytes of JSON, over maxCollectBytes ${maxCollectBytes}; ` +
        "collect less (not retried)",
    };
  }
  return { json };
}

/**
 * The item settle (src/ledger `settleItem`): offered one more item when the invocation's chaining
 * budget has room; the started item's message after the commit, or the claimed one returned to run.
 */
async function settle(
  rt: StepRuntime,
  c: ClaimedItem,
  fence: ItemFence,
  p: PreparedItem | null,
  outcome: ItemSettleOutcome,
  request: string | null,
  response: RunOutcome["response"] | null,
): Promise<ItemDone> {
  const now = rt.now();
  const offer = p && rt.budget ? rt.budget.offerItem(p.definition, p.inner.type === "GATEWAY" ? p.inner.config.timeoutMs : 0, now) : null;
  const result = await settleItem(rt.db, {
    fence,
    now,
    outcome,
    request,
    response: response ?? null,
    // Unknown settings (an unrunnable item): start nothing, stop nothing.
    concurrency: p?.map.config.concurrency ?? 0,
    stopOnFailure: p ? p.map.config.onItemFailure === "fail" : false,
    chainLeaseMs: offer ? offer.leaseMs : null,
  }).catch((error: unknown) => {
    if (offer) rt.budget?.unclaimed(offer);
    throw error;
  });
  const started = result.started;
  if (offer && started?.state !== "EXECUTING") rt.budget?.unclaimed(offer);
  if (!result.settled) {
    log.warn("step.fenced_out", { message: "late item result fenced out and recorded", ...fence, outcome: outcome.state });
    return { decision: { action: "ack", why: "fenced out (recorded)" }, next: null, mapWoken: false };
  }
  if (outcome.state === "FAILED") log.warn("step.failed", { ...fence, error: outcome.error });
  if (started?.state === "DISPATCHED")
    await sendItemMessages(rt.queue, [{ executionId: fence.executionId, vertexId: fence.vertexId, item: started.item }]);
  const decision: Decision = { action: "ack", why: `item settled ${outcome.state}` };
  if (started?.state !== "EXECUTING" || !offer) return { decision, next: null, mapWoken: result.mapWoken };
  const ref: ItemRef = { executionId: fence.executionId, vertexId: fence.vertexId, item: started.item };
  return { decision, next: chainedItem(c, ref, started.itemJson, started.claimed, offer), mapWoken: result.mapWoken };
}

/**
 * The run of an item a settle claimed: the execution's, with the item's own fields. Its key's sends
 * are not in hand ("{}"): a key persisted by an earlier attempt (an operator retry's item) records
 * its send again, which finds the one on record.
 */
function chainedItem(
  from: ClaimedItem,
  ref: ItemRef,
  itemJson: string,
  claimed: ClaimedStep & { createdAt: number },
  offer: BudgetOffer,
): ClaimedItem {
  return {
    ref,
    run: {
      ...from.run,
      itemState: "EXECUTING",
      leaseUntil: claimed.leaseUntil,
      parkedUntil: null,
      availableAt: null,
      itemJson,
      inProgressSince: null,
      keySendsJson: "{}",
      itemCreatedAt: claimed.createdAt,
    },
    claimed,
    leaseMs: offer.leaseMs,
    offer,
  };
}
