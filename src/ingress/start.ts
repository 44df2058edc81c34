/**
 * Starting an execution of a stored workflow: derive the identity, plan the entry's successors,
 * run the start batch (src/ledger/executions.ts, ONE round trip), then — only if this request
 * created the execution — send one queue message per DISPATCHED step.
 *
 * Messages go out after the commit, never before: a message for a step row that does not exist
 * yet would be dropped by the consumer. If the send itself fails, the rows are committed and the
 * steps reaper re-sends DISPATCHED steps whose message was lost (SPEC section 4), so the answer
 * stays 202.
 *
 * With chaining (src/steps/chain.ts, `deps.chain`), the start batch also claims one first step
 * whose timeout fits the inline window, and that step runs after the answer, under
 * `ctx.waitUntil` (which keeps work alive only about 30 s after the response); the other first
 * steps get their messages as before. A claimed step that never runs is re-dispatched by the
 * reaper once its lease expired.
 */
import { DEFAULT_RETENTION, dedupeWindowMsOf, deploymentRetention, retentionOf, type Retention } from "../history/retention";
import { entryPointOf } from "../definitions/schema";
import type { StoredWorkflow } from "../definitions/store";
import { ExpressionError } from "../expressions/evaluate";
import {
  startExecution,
  type ExecutionStatus,
  type IdentityKind,
  type NewExecution,
  type StartPlan,
  type StepRun,
  type TriggerKind,
} from "../ledger";
import {
  asStored,
  ChainBudget,
  chainConfigFromEnv,
  chainedStep,
  type BudgetOffer,
  type ChainConfig,
  type KnownInputs,
} from "../steps/chain";
import { firstStepKey } from "../steps/first-key";
import { runChainedSteps } from "../steps/run-step";
import { defaultRuntime, type StepRuntime } from "../steps/runtime";
import type { StepMessage } from "../steps/messages";
import { takenSuccessors } from "../steps/graph";
import { planReadySteps, type ExpressionContext } from "../steps/plan";
import {
  alternateExecutionId,
  deriveIdentity,
  randomClaimToken,
  randomExecutionId,
  windowExecutionId,
  type IdentityScope,
} from "./identity";
import { identityValueHashes } from "./identity-values";
import { utf8 } from "../lib/crypto";
import { clockOf } from "../lib/clock";
import { errorMessage, log } from "../lib/log";
import { ingressProblems } from "./problems";
import { commonProblems } from "../lib/common-problems";
import { executionProblems } from "../steps/problems";

export interface IngressDeps {
  db: D1Database;
  queue: Pick<Queue<StepMessage>, "sendBatch">;
  /** The clock: every statement gets `now` as a parameter. */
  now: () => number;
  /** Run the first step inline after the answer (step chaining); absent: every first step gets a message. */
  chain?: InlineChain | null;
  /** The deployment's retention (HISTORY_* vars); absent: SPEC section 12's defaults. */
  retention?: Retention;
}

export interface InlineChain {
  /** The step runtime of the inline run; its `chain` (the configuration) must be set. */
  runtime: StepRuntime;
  /** Keeps the inline run alive after the response (`ctx.waitUntil`). */
  waitUntil: (work: Promise<unknown>) => void;
}

/** With `ctx` (an HTTP request's), the first step is chained when `CHAIN_STEPS` is on. */
export function ingressDeps(env: Env, ctx?: ExecutionContext): IngressDeps {
  const deps: IngressDeps = {
    db: env.DB,
    queue: env.QUEUE as Queue<StepMessage>,
    now: clockOf(env),
    retention: deploymentRetention(env),
  };
  // With chaining off (the default) a trigger builds no step runtime.
  const chain = ctx ? chainConfigFromEnv(env) : null;
  if (!ctx || !chain) return deps;
  return { ...deps, chain: { runtime: defaultRuntime(env, { chain }), waitUntil: (work) => ctx.waitUntil(work) } };
}

export type StartIdentity = { kind: "forced" } | { kind: Exclude<IdentityKind, "forced">; material: unknown; scope: IdentityScope };

export interface StartRequest {
  workflow: StoredWorkflow;
  triggerKind: TriggerKind;
  payload: unknown;
  /** `payload`'s stored JSON and its UTF-8 bytes, when the caller already has them (the body's check made them). */
  payloadJson?: { json: string; bytes: number } | undefined;
  identity: StartIdentity;
  startedOverFrom?: string | null;
  /** The definition came from a cache: start only if its version is still the latest. */
  requireLatestVersion?: boolean;
}

/** SPEC section 3's answer body, exactly. */
export interface StartResult {
  executionId: string;
  deduplicated: boolean;
  identity: IdentityKind;
  status: ExecutionStatus;
}

async function planFor(workflow: StoredWorkflow, executionId: string, triggerKind: TriggerKind, payload: unknown): Promise<StartPlan> {
  const entry = entryPointOf(workflow.definition);
  const context: ExpressionContext = {
    payload,
    steps: { [entry.id]: payload },
    execution: { id: executionId, workflowId: workflow.workflowId, trigger: triggerKind },
  };
  try {
    // Each edge leaving the entry is evaluated once; the plan and the entry's next_vertices share it.
    const entryNext = await takenSuccessors(workflow.definition, entry.id, context);
    return { steps: planReadySteps(workflow.definition, new Map([[entry.id, new Set(entryNext)]])), entryNext };
  } catch (error) {
    if (!(error instanceof ExpressionError)) throw error;
    // Nothing is recorded: the caller can fix the payload (or the workflow) and send it again.
    throw ingressProblems.edgeConditionFailed(error.message);
  }
}

export async function startWorkflowExecution(deps: IngressDeps, request: StartRequest): Promise<StartResult> {
  const { workflow, triggerKind, payload, identity } = request;
  const entry = entryPointOf(workflow.definition);
  const record: NewExecution = {
    workspace: workflow.workspace,
    workflowId: workflow.workflowId,
    version: workflow.version,
    entryVertexId: entry.id,
    triggerKind,
    identityKind: identity.kind,
    payloadJson: request.payloadJson?.json ?? JSON.stringify(payload ?? null),
    startedOverFrom: request.startedOverFrom ?? null,
    requireLatestVersion: request.requireLatestVersion ?? false,
    // Fixed at the start: a later change of the vars or the workflow does not move a kept execution.
    retention: retentionOf(workflow.definition, deps.retention ?? DEFAULT_RETENTION),
  };
  const now = deps.now();
  const config = deps.chain?.runtime.chain ?? null;
  // An inline slot of this isolate, held from the offer to the end of the inline run (or given back
  // at once if the batch claims nothing): past CHAIN_INLINE_MAX runs or CHAIN_INLINE_MAX_BYTES of
  // their payloads, the first step goes to the queue.
  const slot = deps.chain && config ? takeInlineSlot(config, request.payloadJson?.bytes ?? utf8(record.payloadJson).byteLength, now) : null;
  const budget = slot && config ? new ChainBudget(config, deps.chain!.runtime.db, now + config.inlineWindowMs) : null;
  // The start batch counts towards the invocation's D1 queries too.
  const db = budget?.db ?? deps.db;
  const offerFor = (...plans: StartPlan[]): BudgetOffer | null =>
    budget ? budget.offer(workflow.definition, [...new Set(plans.flatMap(firstSteps))], now) : null;

  try {
    return await startAndRun(deps, request, record, db, now, offerFor, budget, slot);
  } finally {
    // Held on only by an inline run handed to waitUntil (it gives the slot back when it ends).
    slot?.releaseUnlessKept();
  }
}

/** The start batch, the first messages and the inline run (`budget`: chaining on and a slot taken). */
async function startAndRun(
  deps: IngressDeps,
  request: StartRequest,
  record: NewExecution,
  db: D1Database,
  now: number,
  offerFor: (...plans: StartPlan[]) => BudgetOffer | null,
  budget: ChainBudget | null,
  slot: InlineSlot | null,
): Promise<StartResult> {
  const { workflow, triggerKind, payload, identity } = request;
  const entry = entryPointOf(workflow.definition);
  let outcome;
  let offer: BudgetOffer | null;
  // What the first step reads of the execution, as D1 would give it back (built only for an inline run).
  let known: KnownInputs | null = null;
  const knownInputs = (): KnownInputs => (known ??= { payload: { value: asStored(payload) }, outputs: new Map() });
  const execution = (id: string) => ({ id, workflowId: workflow.workflowId, trigger: triggerKind });
  // The first step's key, computed as its first attempt would, for the start batch to persist with the claim.
  const keyOf = (o: BudgetOffer | null, executionId: string) =>
    o && !request.startedOverFrom ? firstStepKey(workflow.definition, o.candidates[0]!, knownInputs(), execution(executionId)) : null;
  if (identity.kind === "forced") {
    const executionId = randomExecutionId();
    const plan = await planFor(workflow, executionId, triggerKind, payload);
    offer = offerFor(plan);
    outcome = await startExecution(db, record, { mode: "forced", executionId, plan }, now, offer, await keyOf(offer, executionId));
  } else {
    const hash = await deriveIdentity({
      workspace: workflow.workspace,
      workflowId: workflow.workflowId,
      entryVertexId: entry.id,
      kind: identity.kind,
      material: identity.material,
      scope: identity.scope,
    });
    // Every window's id is derived from the identity and the window's start (`now`), the first
    // window's too: an id is never given twice (docs/history.md "Tombstones and ids"). The alternate
    // is for a row or tombstone that already holds it (a clock that stepped back).
    const claimToken = randomClaimToken();
    const executionId = await windowExecutionId(hash, now);
    const alternate = await alternateExecutionId(hash, now, claimToken);
    // Clamped: a version saved before durations had one maximum may hold a longer window.
    const windowMs = dedupeWindowMsOf(workflow.definition);
    // The plan can depend on the execution id only through an entry edge's `when`; without one
    // both candidate ids share a plan, and no expression is evaluated twice.
    const idMatters = workflow.definition.edges.some((e) => e.from === entry.id && e.when !== undefined);
    const first = await planFor(workflow, executionId, triggerKind, payload);
    const second = idMatters ? await planFor(workflow, alternate, triggerKind, payload) : first;
    offer = offerFor(first, second);
    outcome = await startExecution(
      db,
      record,
      {
        mode: "claim",
        identity: hash,
        claimToken,
        executionId,
        alternateExecutionId: alternate,
        expiresAt: now + windowMs,
        plans: { first, alternate: second },
        reuseAfterFailure: entry.config.reusePolicy === "after-failure",
        // The business values the search by business id finds it by (a fields or client identity only).
        identityValues: await identityValueHashes(workflow.workspace, identity),
      },
      now,
      offer,
      // For the window's id only: under the alternate id the step persists its key when it runs.
      await keyOf(offer, executionId),
    );
  }

  if ("refused" in outcome) {
    const from = request.startedOverFrom ?? "";
    if (outcome.fromStatus === "RUNNING") throw executionProblems.executionRunning(from);
    if (outcome.supersededBy !== null) throw executionProblems.executionSuperseded(from, outcome.supersededBy);
    if (outcome.liveExecutionId !== null) throw executionProblems.liveExecutionExists(from, outcome.liveExecutionId);
    throw commonProblems.notFound(`Execution ${from}`);
  }
  if (outcome.created) {
    await sendFirstMessages(deps, outcome.executionId, outcome.plan, outcome.chained?.vertexId);
    if (outcome.chained && deps.chain && budget && offer) {
      const run = inlineRun(workflow, record, outcome.executionId, outcome.sealedSecretsJson);
      const first = chainedStep(run, outcome.chained, now, knownInputs(), offer);
      const runtime: StepRuntime = { ...deps.chain.runtime, db: budget.db, budget };
      const executionId = outcome.executionId;
      slot?.keep();
      deps.chain.waitUntil(
        runChainedSteps(runtime, first)
          .catch((error: unknown) =>
            log.error("step.crashed", { message: "inline run of the first step failed", executionId, error: errorMessage(error) }),
          )
          .finally(() => slot?.release()),
      );
    }
  }
  return { executionId: outcome.executionId, deduplicated: !outcome.created, identity: identity.kind, status: outcome.status };
}

/**
 * The inline runs of first steps this isolate has in flight. A Worker isolate serves many requests
 * on one thread: every inline run it takes on slows the answers of the triggers that come next, and
 * holds its payload in the isolate's memory. Past `CHAIN_INLINE_MAX` runs, or `CHAIN_INLINE_MAX_BYTES`
 * of their payloads, the first step goes to the queue, whose consumers scale out (and chain the
 * rest of the execution there). Per isolate and in memory: a performance bound, never a
 * correctness one (a claim that was not made is a message that was sent).
 */
const inlineHeld = new Set<InlineHold>();

/** What one inline run holds: its payload's stored JSON, in UTF-8 bytes, until the run ends or `until` passes. */
interface InlineHold {
  bytes: number;
  /** The run's deadline (the inline window): no chained step of the run may outlast it. */
  until: number;
}

interface InlineSlot {
  /** The inline run was handed to waitUntil: it gives the slot back itself. */
  keep(): void;
  release(): void;
  releaseUnlessKept(): void;
}

function takeInlineSlot(config: ChainConfig, bytes: number, now: number): InlineSlot | null {
  // A run whose `waitUntil` the platform cancelled never reaches the `finally` that releases it:
  // past its deadline it runs no more steps either way, so it no longer counts.
  for (const hold of inlineHeld) if (hold.until < now) inlineHeld.delete(hold);
  if (inlineHeld.size >= config.inlineMax || heldBytes() + bytes > config.inlineMaxBytes) return null;
  const hold: InlineHold = { bytes, until: now + config.inlineWindowMs };
  inlineHeld.add(hold);
  let kept = false;
  const slot: InlineSlot = {
    keep: () => {
      kept = true;
    },
    // Idempotent, and a no-op for a hold already dropped at its deadline.
    release: () => void inlineHeld.delete(hold),
    releaseUnlessKept: () => {
      if (!kept) slot.release();
    },
  };
  return slot;
}

function heldBytes(): number {
  let total = 0;
  for (const hold of inlineHeld) total += hold.bytes;
  return total;
}

/** The inline runs in flight in this isolate, as of the last slot taken (tests). */
export const inlineRunsInFlight = (): number => inlineHeld.size;

/** The payload those runs hold, in the unit of CHAIN_INLINE_MAX_BYTES: UTF-8 bytes (tests). */
export const inlineBytesInFlight = (): number => heldBytes();

const firstSteps = (plan: StartPlan): string[] => plan.steps.filter((s) => s.state === "DISPATCHED").map((s) => s.vertexId);

/** The execution as the inline run of its first step sees it (what the claim batch's `readStepRun` reads). */
function inlineRun(workflow: StoredWorkflow, record: NewExecution, executionId: string, sealedSecretsJson: string | null): StepRun {
  return {
    executionId,
    workspace: record.workspace,
    workflowId: record.workflowId,
    version: record.version,
    entryVertexId: record.entryVertexId,
    triggerKind: record.triggerKind,
    startedOverFrom: record.startedOverFrom ?? null,
    executionStatus: "RUNNING",
    definitionJson: JSON.stringify(workflow.definition),
    stepState: "EXECUTING",
    leaseUntil: null,
    availableAt: null,
    inProgressSince: null,
    sealedSecretsJson,
    keySendsJson: "{}",
    parkedUntil: null,
    wakeAt: null,
    stepCreatedAt: null,
  };
}

async function sendFirstMessages(deps: IngressDeps, executionId: string, plan: StartPlan, chained?: string): Promise<void> {
  const messages = plan.steps
    .filter((s) => s.state === "DISPATCHED" && s.vertexId !== chained)
    .map((s) => ({ body: { executionId, vertexId: s.vertexId } satisfies StepMessage }));
  if (messages.length === 0) return;
  try {
    await deps.queue.sendBatch(messages);
  } catch (error) {
    // The step rows are committed as DISPATCHED: the reaper re-sends them. Loud, not fatal.
    log.error("ingress.send_failed", {
      message: "queue send failed; the steps reaper will re-send",
      executionId,
      error: errorMessage(error),
    });
  }
}
