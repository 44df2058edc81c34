/**
 * Step chaining: when a step settles and successors become ready, the same invocation claims one
 * of them in the settle batch (src/ledger/chain-claim.ts) and runs it at once; the trigger claims
 * the first step in its start batch and runs it after answering (`ctx.waitUntil`). The queue
 * carries only what one invocation should not do itself: the other ready successors, work past
 * the budget below, delayed retries, and recovery.
 *
 * This module holds the pure parts: the configuration (wrangler.toml [vars]), the per-invocation
 * budget (steps, wall time, D1 queries), which successors to offer a settle batch, and the inputs
 * of a chained step when everything it reads is already in memory. The run itself is
 * src/steps/run-step.ts (`runStep`, `runChainedSteps`).
 */
import type { Vertex, WorkflowDefinition } from "../definitions/schema";
import { stepInputsOf, type StepInputsSpec } from "../definitions/step-inputs";
import type { ChainedClaim, ChainOffer, ClaimedStep, StepInputs, StepRef, StepRun } from "../ledger";
import { predecessorsOf, vertexOf } from "./graph";
import { ownMember, setOwnMember } from "../lib/own-member";
import type { ExpressionContext } from "./plan";
import { countQueries, type CountedD1, type QueryReservation } from "../lib/query-count";

export interface ChainConfig {
  /** The most steps one invocation runs after the one it was started for. */
  maxSteps: number;
  /** The wall time one queue invocation spends chaining, from its start. */
  maxMs: number;
  /**
   * D1 queries (statements) one invocation may send or have reserved (a batch's own messages, a
   * stream's polls) before it stops chaining (Workers' limit is 1,000; capped at 900).
   */
  maxQueries: number;
  /** The lease of a chained claim: a step claimed and never run is re-dispatched by the reaper after it. */
  leaseMs: number;
  /** The trigger's inline window: `ctx.waitUntil` keeps work alive about 30 s after the response. */
  inlineWindowMs: number;
  /** The most inline runs of first steps one isolate takes on at once; past it, first steps are queued. */
  inlineMax: number;
  /**
   * The most payload one isolate's inline runs hold at once, as the UTF-8 bytes of the payloads'
   * stored JSON: each run keeps its payload (and what it parses of it) until it ends, and an isolate has
   * 128 MB. Past it, first steps are queued.
   */
  inlineMaxBytes: number;
}

export const DEFAULT_CHAIN: ChainConfig = {
  maxSteps: 50,
  maxMs: 60_000,
  maxQueries: 500,
  leaseMs: 30_000,
  inlineWindowMs: 25_000,
  inlineMax: 64,
  inlineMaxBytes: 16 * 1024 * 1024,
};

/** The shortest chained lease: three heartbeats (src/steps/run-step.ts, every third of the lease, at most once a second). */
export const MIN_CHAIN_LEASE_MS = 3_000;

/** Time kept free after a step's timeout inside the window: the settle and its commit. */
export const CHAIN_MARGIN_MS = 2_000;

/**
 * Queries kept free for one more step: its inputs read, key persist (3), heartbeats, retry or
 * settle batch with its fan-in decisions and the next chained claim. Per vertex of the definition
 * on top, because the settle batch decides every descendant.
 */
export const QUERIES_PER_STEP = 40;

/**
 * Statements of one settle batch (src/ledger/step-settle.ts `settleAndDispatch`) without its chained
 * claim, which the offer counts: five fixed, the finish, a backfill and a fan-in decision per vertex
 * at most, and a margin. What a queue message still holds back once it settles.
 */
export function settleQueries(definition: WorkflowDefinition): number {
  return 10 + 2 * definition.vertices.length;
}

/** The longest a Gateway call may take (src/definitions/schema.ts `timeoutMs`). */
const MAX_CALL_MS = 300_000;

/**
 * Queries a queue batch holds back for each of its own messages, whose steps run beside the chained
 * ones and are not offered: one step's worth (`QUERIES_PER_STEP`: claim, inputs, key persist,
 * settle) plus a heartbeat every `heartbeatEveryMs` through the longest call. With the step lease
 * of 30 s (a heartbeat every 10 s) that is 40 + 30 = 70; a batch of ten holds 700 until its
 * messages end (docs/steps.md "Chaining").
 */
export function queriesPerMessage(heartbeatEveryMs: number): number {
  const heartbeats = heartbeatEveryMs > 0 ? Math.ceil(MAX_CALL_MS / heartbeatEveryMs) : 0;
  return QUERIES_PER_STEP + heartbeats;
}

interface ChainVars {
  CHAIN_STEPS?: string;
  CHAIN_MAX_STEPS?: string;
  CHAIN_MAX_MS?: string;
  CHAIN_MAX_QUERIES?: string;
  CHAIN_LEASE_MS?: string;
  CHAIN_INLINE_WINDOW_MS?: string;
  CHAIN_INLINE_MAX?: string;
  CHAIN_INLINE_MAX_BYTES?: string;
}

function positive(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return value !== undefined && value !== "" && Number.isFinite(n) && n >= 0 ? Math.floor(n) : fallback;
}

/** Read once per `env` object (an isolate keeps its own): every trigger and every queue batch asks. */
const chainConfigs = new WeakMap<object, ChainConfig | null>();

/** Chaining's configuration from the Worker's vars; null when `CHAIN_STEPS` is "off" (on by default). */
export function chainConfigFromEnv(env: unknown): ChainConfig | null {
  if (env === null || typeof env !== "object") return readChainConfig({});
  if (chainConfigs.has(env)) return chainConfigs.get(env)!;
  const config = readChainConfig(env as ChainVars);
  chainConfigs.set(env, config);
  return config;
}

function readChainConfig(vars: ChainVars): ChainConfig | null {
  if ((vars.CHAIN_STEPS ?? "on").toLowerCase() === "off") return null;
  return {
    maxSteps: positive(vars.CHAIN_MAX_STEPS, DEFAULT_CHAIN.maxSteps),
    maxMs: positive(vars.CHAIN_MAX_MS, DEFAULT_CHAIN.maxMs),
    maxQueries: Math.min(positive(vars.CHAIN_MAX_QUERIES, DEFAULT_CHAIN.maxQueries), 900),
    leaseMs: Math.max(positive(vars.CHAIN_LEASE_MS, DEFAULT_CHAIN.leaseMs), MIN_CHAIN_LEASE_MS),
    inlineWindowMs: Math.min(positive(vars.CHAIN_INLINE_WINDOW_MS, DEFAULT_CHAIN.inlineWindowMs), 28_000),
    inlineMax: positive(vars.CHAIN_INLINE_MAX, DEFAULT_CHAIN.inlineMax),
    inlineMaxBytes: positive(vars.CHAIN_INLINE_MAX_BYTES, DEFAULT_CHAIN.inlineMaxBytes),
  };
}

/** How long a vertex may take: a Gateway call its timeout; a transform (no I/O) none. */
export function timeoutOf(vertex: Vertex | undefined): number {
  return vertex?.type === "GATEWAY" ? vertex.config.timeoutMs : 0;
}

/** A claim offered to a batch, with what the budget holds for it until the claimed step has run. */
export interface BudgetOffer extends ChainOffer {
  /** The queries held for the step (its run, its settle), given back once it ran or was not claimed. */
  readonly queries: number;
}

/**
 * One invocation's chaining budget, shared by every message of a queue batch (the query limit is
 * per invocation). It counts the D1 queries sent through `db` — with the invocation's own counter
 * when `db` is already counted (src/lib/query-count.ts): a stream's polls and the inline run of
 * its first step then share one count, and what the stream reserved counts as spent.
 *
 * The messages of a batch run at once, so an offer RESERVES: the step counts from the moment it is
 * offered (given back if the batch claimed nothing), and its queries are held until the step ran —
 * two settles in flight together cannot both take the last step, or the last queries. What runs
 * beside the chained steps and is never offered (a batch's own messages) reserves with `reserve`.
 */
export class ChainBudget {
  readonly db: D1Database;
  readonly #counted: CountedD1;
  #steps = 0;
  #heldQueries = 0;

  constructor(
    readonly config: ChainConfig,
    db: D1Database,
    /** No chained step may run past this time (its timeout included). */
    readonly deadline: number,
  ) {
    this.#counted = countQueries(db);
    this.db = this.#counted.db;
  }

  /** `db` counted on this budget's tally: a batch whose messages name several shards budgets them as one invocation. */
  countOn(db: D1Database): D1Database {
    return countQueries(db, { sharing: this.#counted }).db;
  }

  /** Chained steps offered or taken (an offer not claimed is given back). */
  get steps(): number {
    return this.#steps;
  }

  /** Queries the invocation sent (through this budget's database, or any sharing its counter). */
  queries(): number {
    return this.#counted.queries();
  }

  /** Queries sent plus those reserved and not yet sent: what an offer must leave room beside. */
  committed(): number {
    return this.#counted.committed() + this.#heldQueries;
  }

  /** Hold `queries` back from offers for work beside the chained steps (given back with `release`). */
  reserve(queries: number): QueryReservation {
    return this.#counted.reserve(queries);
  }

  /**
   * The successors to offer a settle (or start) batch, in order of preference, or null when the
   * budget is spent: one more step, its queries and its timeout must all fit. A successor with
   * this vertex as its only predecessor comes first (it is certainly ready once the edge is
   * taken); a fan-in is claimed only if this settle made it ready. An offer reserves its step and
   * queries: hand it back with `unclaimed` or `ran`.
   */
  offer(definition: WorkflowDefinition, successors: readonly string[], now: number): BudgetOffer | null {
    if (this.#steps >= this.config.maxSteps) return null;
    const queries = QUERIES_PER_STEP + definition.vertices.length;
    if (this.committed() + queries > this.config.maxQueries) return null;
    const fits = successors.filter((id) => now + timeoutOf(vertexOf(definition, id)) + CHAIN_MARGIN_MS <= this.deadline);
    const single = fits.filter((id) => predecessorsOf(definition, id).length === 1);
    const candidates = [...single, ...fits.filter((id) => !single.includes(id))];
    if (candidates.length === 0) return null;
    this.#steps++;
    this.#heldQueries += queries;
    return { candidates, leaseMs: this.config.leaseMs, queries };
  }

  /**
   * One more MAP item for a settle batch to claim (docs/steps.md "MAP"), or null when the budget is
   * spent: counted and reserved as a chained step (`offer`), its timeout the item step's. Hand it
   * back with `unclaimed` or `ran`.
   */
  offerItem(definition: WorkflowDefinition, timeoutMs: number, now: number): BudgetOffer | null {
    if (this.#steps >= this.config.maxSteps) return null;
    const queries = QUERIES_PER_STEP + definition.vertices.length;
    if (this.committed() + queries > this.config.maxQueries) return null;
    if (now + timeoutMs + CHAIN_MARGIN_MS > this.deadline) return null;
    this.#steps++;
    this.#heldQueries += queries;
    return { candidates: [], leaseMs: this.config.leaseMs, queries };
  }

  /** The batch claimed nothing: the step and its queries are free again. */
  unclaimed(offer: BudgetOffer): void {
    this.#steps--;
    this.#heldQueries -= offer.queries;
  }

  /** The claimed step ran (or crashed): what it sent is counted now, so its held queries are free. */
  ran(offer: BudgetOffer): void {
    this.#heldQueries -= offer.queries;
  }

  /**
   * A step run inline (src/steps/inline-transform.ts) that its settle batch did not take after all
   * (the settle was fenced out, or the execution failed meanwhile): the step is free again. Its
   * queries were given back by `ran` when it ran: it sends none of its own.
   */
  notTaken(): void {
    this.#steps--;
  }
}

/**
 * What the invocation already holds of an execution: the payload (if it read it) and the outputs it
 * read or produced, by step id. A Map: a vertex may be named `constructor` or `toString`, which a
 * plain object would "hold" as its prototype's function.
 */
export interface KnownInputs {
  payload: { value: unknown } | null;
  outputs: ReadonlyMap<string, unknown>;
}

/** A step a chained claim took, with everything its run needs but (maybe) its inputs. */
export interface ChainedStep {
  ref: StepRef;
  run: StepRun;
  claimed: ClaimedStep;
  /** The claim's `now` (the step's `updated_at`). */
  claimedAt: number;
  /** The lease the claim holds; the run's heartbeat extends it by this much. */
  leaseMs: number;
  known: KnownInputs;
  /** The budget's offer this claim took (null for a claim of the step's own message). */
  offer: BudgetOffer | null;
}

/** The run of a chained step: the execution's, with the fresh step's own fields. */
export function chainedStep(
  executionRun: StepRun,
  chained: ChainedClaim,
  claimedAt: number,
  known: KnownInputs,
  offer: BudgetOffer,
): ChainedStep {
  const { vertexId, createdAt, keySendsJson, ...claimed } = chained;
  return {
    ref: { executionId: executionRun.executionId, vertexId },
    run: {
      ...executionRun,
      stepState: "EXECUTING",
      leaseUntil: chained.leaseUntil,
      availableAt: null,
      parkedUntil: null,
      wakeAt: null,
      inProgressSince: null,
      // A fresh step has no key sends on record, unless the start batch persisted its key with the claim.
      keySendsJson: keySendsJson ?? "{}",
      stepCreatedAt: createdAt,
    },
    claimed,
    claimedAt,
    leaseMs: chained.leaseUntil - claimedAt,
    known,
    offer,
  };
}

/**
 * The expression context of a step that read `inputs`: the payload (if the step reads it) is also
 * the entry's output; the other outputs under their step ids.
 */
export function contextOf(
  inputs: Extract<StepInputs, { withinBound: true }>,
  entryVertexId: string,
  execution: ExpressionContext["execution"],
): ExpressionContext {
  const steps = { ...inputs.outputs };
  if (inputs.readsPayload) setOwnMember(steps, entryVertexId, inputs.payload); // the entry's output is the payload
  return { payload: inputs.payload, steps, execution };
}

/** A value as a read from D1 would give it back (the stored JSON, parsed). */
export function asStored(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value ?? null)) as unknown;
}

const specs = new WeakMap<WorkflowDefinition, StepInputsSpec>();

function specOf(definition: WorkflowDefinition): StepInputsSpec {
  let spec = specs.get(definition);
  if (!spec) {
    spec = stepInputsOf(definition);
    specs.set(definition, spec);
  }
  return spec;
}

const bytes = (text: string): number => new TextEncoder().encode(text).byteLength;

/**
 * The chained step's inputs from memory, exactly as `readStepInputs` would build them — or null
 * when it reads something the invocation does not hold (a dynamic `steps` reference, an output
 * another worker produced), and the caller loads them from D1 after the commit. The bound is
 * measured the same way (the payload, plus the JSON object of the outputs read).
 */
export function inputsFromMemory(
  definition: WorkflowDefinition,
  vertexId: string,
  known: KnownInputs,
  maxBytes: number,
): StepInputs | null {
  const own = ownMember(specOf(definition).vertices, vertexId) as StepInputsSpec["vertices"][string] | undefined;
  if (!own || own.all) return null;
  if (own.payload && !known.payload) return null;
  if (own.steps.some((id) => !known.outputs.has(id))) return null;
  const outputs = Object.fromEntries(own.steps.map((id) => [id, known.outputs.get(id)]));
  const outputSizes = Object.fromEntries(own.steps.map((id) => [id, bytes(JSON.stringify(known.outputs.get(id) ?? null))]));
  const outputsBytes = 2 + own.steps.reduce((n, id) => n + outputSizes[id]! + bytes(id) + 4, 0);
  const payloadBytes = own.payload && known.payload ? bytes(JSON.stringify(known.payload.value ?? null)) : 0;
  if (outputsBytes + payloadBytes > maxBytes) {
    return { withinBound: false, inputBytes: outputsBytes + payloadBytes, readsPayload: own.payload, outputSizes };
  }
  return {
    withinBound: true,
    payload: own.payload ? known.payload!.value : undefined,
    readsPayload: own.payload,
    outputs,
    unrecorded: [],
  };
}
