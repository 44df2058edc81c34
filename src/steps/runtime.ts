/**
 * What the step engine runs against: the database, the queue, the Worker env (secrets and the
 * outbound allowlist), outbound fetch, and the clock. Production builds it from `env`
 * (`defaultRuntime`); tests pass the counting D1 wrapper, a controllable clock or a capturing
 * queue producer — the store is always the real D1.
 */
import { chainConfigFromEnv, type ChainBudget, type ChainConfig } from "./chain";
import type { QueryReservation } from "../lib/query-count";
import type { StepMessage } from "./messages";
import { clockOf } from "../lib/clock";
import { outboundFetchOf } from "../lib/outbound-fetch";

export interface StepQueue {
  send(body: StepMessage, options?: QueueSendOptions): Promise<void>;
  sendBatch(messages: Iterable<MessageSendRequest<StepMessage>>, options?: QueueSendBatchOptions): Promise<void>;
}

export interface StepRuntime {
  db: D1Database;
  queue: StepQueue;
  /** Secrets (`{{ secrets.NAME }}`) and `OUTBOUND_ALLOWLIST` are read from here at send time. */
  env: Env;
  fetch: typeof fetch;
  now: () => number;
  /** Waits in the invocation (a permit's token due within a second: src/steps/permit-gate.ts); default a timer. */
  sleep?: (ms: number) => Promise<void>;
  random: () => number;
  /** How long a claim holds a step before another worker may take it over. */
  leaseMs: number;
  /** A DISPATCHED step due for this long without being claimed has lost its message. */
  overdueMs: number;
  /** The cap of the reaper's per-step re-send back-off (see `redispatchOverdue`). */
  maxResendWaitMs?: number;
  /** Rows per reaper sweep. */
  reapLimit: number;
  /**
   * Opportunistic reaping after a queue batch, at most this often per isolate (the cron tick is
   * the guaranteed cadence). `null`: never (tests that control delivery themselves).
   */
  reapEveryMs: number | null;
  /** Fenced lease extension during long calls; default a third of the lease. `0` disables. */
  heartbeatEveryMs?: number;
  /**
   * Step chaining (src/steps/chain.ts): null runs every step from its own queue message.
   * Production reads it from wrangler.toml [vars] (`CHAIN_STEPS`, `CHAIN_*`).
   */
  chain?: ChainConfig | null;
  /** This invocation's chaining budget (set per queue batch, or per trigger); `db` then counts through it. */
  budget?: ChainBudget;
  /**
   * What the budget holds back for this queue message's own step (src/steps/consumer.ts
   * `holdForMessages`): shrunk to its settle when it settles, given back once that is sent.
   */
  messageHold?: QueryReservation;
  /** Fault injection for tests: runs when a chained claim is in hand, before the step runs (a throw is a crash there). */
  beforeChainedRun?: (step: { executionId: string; vertexId: string; epoch: number }) => void | Promise<void>;
  /** Fault injection for tests: runs after a vertex's side effect, before its settle. */
  afterRun?: (step: { executionId: string; vertexId: string; epoch: number }) => void | Promise<void>;
}

export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_OVERDUE_MS = 60_000;

export function defaultRuntime(env: Env, overrides: Partial<StepRuntime> = {}): StepRuntime {
  return {
    db: env.DB,
    queue: env.QUEUE as unknown as StepQueue,
    env,
    fetch: outboundFetchOf(env),
    now: clockOf(env),
    random: Math.random,
    leaseMs: DEFAULT_LEASE_MS,
    overdueMs: DEFAULT_OVERDUE_MS,
    reapLimit: 100,
    reapEveryMs: 30_000,
    chain: chainConfigFromEnv(env),
    ...overrides,
  };
}
