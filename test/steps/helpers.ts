/**
 * Test harness for steps: the real D1 (per-file storage), the real ingress start batch, the real
 * consumer (`handleStepBatch`) fed with `createMessageBatch`, a controllable clock, and a queue
 * producer that captures sends so a test decides when each message is delivered.
 *
 * The destination is a Hono app behind idemflow's own Idempotency-Key ledger middleware, on the
 * same real D1: "charged once" is proven by the real ledger, not by a map in the test.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult, waitOnExecutionContext, type QueueResult } from "cloudflare:test";
import { Hono } from "hono";
import { app } from "../../src/app";
import { WorkflowDefinition, type WorkflowDefinitionInput } from "../../src/definitions/schema";
import { getWorkflow, saveWorkflow, type StoredWorkflow } from "../../src/definitions/store";
import { idempotency } from "../../src/http/idempotency";
import { startWorkflowExecution, type IngressDeps, type StartResult } from "../../src/ingress/start";
import { handleStepBatch } from "../../src/steps/consumer";
import type { StepMessage } from "../../src/steps/messages";
import { defaultRuntime, type StepQueue, type StepRuntime } from "../../src/steps/runtime";
import { DEFAULT_CHAIN, type ChainConfig } from "../../src/steps/chain";
import { createDemoApp } from "../../demo/src/app";
import { dbOf } from "../helpers/shards";
import { claimAndLoad } from "../../src/ledger";

export const DEST = "http://localhost:8788";

export class Clock {
  t = 1_900_000_000_000;
  now = (): number => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
}

export interface Sent {
  body: StepMessage;
  dueAt: number;
}

export class CapturingQueue implements StepQueue {
  pending: Sent[] = [];
  sends = 0;
  failNext = 0;
  constructor(private clock: Clock) {}
  async send(body: StepMessage, options?: QueueSendOptions): Promise<void> {
    await this.sendBatch([{ body, ...(options ?? {}) }]);
  }
  async sendBatch(messages: Iterable<MessageSendRequest<StepMessage>>, options?: QueueSendBatchOptions): Promise<void> {
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error("simulated queue outage");
    }
    for (const m of messages) {
      this.sends++;
      const delay = m.delaySeconds ?? options?.delaySeconds ?? 0;
      this.pending.push({ body: m.body, dueAt: this.clock.now() + delay * 1000 });
    }
  }
  take(): Sent[] {
    const out = this.pending;
    this.pending = [];
    return out;
  }
}

/** A destination that honours keys through the real ledger middleware, with scripted faults. */
export class Destination {
  /** Handler runs (the side effects): one entry per charge actually made. */
  effects: Array<{ path: string; key: string | null; body: unknown }> = [];
  /** Every request that reached the destination, with the headers it carried. */
  requests: Array<{ method: string; url: string; headers: Record<string, string>; body: string }> = [];
  private faults: Array<{ path: string; status: number; headers?: Record<string, string>; body?: string; afterCommit?: boolean }> = [];
  /** Make the call hang until released (a slow destination). */
  hold: Promise<void> | null = null;
  app = new Hono();

  constructor(readonly principal: string) {
    const guarded = idempotency({ principal: () => this.principal, database: () => env.DB });
    const charge = (path: string) => async (c: import("hono").Context) => {
      const body = (await c.req.json().catch(() => null)) as unknown;
      this.effects.push({ path, key: c.req.header("idempotency-key") ?? null, body });
      return c.json({ id: `ch_${this.effects.length}`, received: body }, 201);
    };
    this.app.post("/payments/charges", guarded, charge("/payments/charges"));
    this.app.post("/shipping/labels", guarded, charge("/shipping/labels"));
    // The undo of a charge (docs/steps.md "Compensation"): keyed like a charge, one effect per key.
    this.app.post("/payments/refunds", guarded, charge("/payments/refunds"));
    // No key support; a natural unique key (external_id): a duplicate is a 409.
    this.app.post("/legacy/orders", async (c) => {
      const body = (await c.req.json()) as { external_id: string };
      if (this.effects.some((e) => e.path === "/legacy/orders" && (e.body as { external_id: string }).external_id === body.external_id)) {
        return c.json({ error: "duplicate external_id" }, 409);
      }
      this.effects.push({ path: "/legacy/orders", key: null, body });
      return c.json({ id: `lo_${this.effects.length}` }, 201);
    });
    this.app.post("/echo", async (c) => c.json({ headers: Object.fromEntries(c.req.raw.headers) }, 200));
    this.app.post("/big", (c) => c.text("x".repeat(10_000)));
    this.app.post("/bad", (c) => c.json({ error: "invalid amount" }, 400));
  }

  /** The next `count` requests to `path` answer `status` (before the handler, or after it ran). */
  fault(path: string, status: number, count = 1, more: { headers?: Record<string, string>; afterCommit?: boolean } = {}): void {
    for (let i = 0; i < count; i++) this.faults.push({ path, status, ...more });
  }

  fetch: typeof fetch = async (input, init) => {
    const request = new Request(input as RequestInfo, init);
    const bodyText = await request.clone().text();
    this.requests.push({ method: request.method, url: request.url, headers: Object.fromEntries(request.headers), body: bodyText });
    if (this.hold) await this.hold;
    const path = new URL(request.url).pathname;
    const i = this.faults.findIndex((f) => f.path === path);
    if (i >= 0) {
      const [f] = this.faults.splice(i, 1);
      if (f!.afterCommit) await this.app.fetch(request, env, createExecutionContext());
      return new Response(JSON.stringify({ error: "scripted" }), {
        status: f!.status,
        headers: { "content-type": "application/json", ...(f!.headers ?? {}) },
      });
    }
    return this.app.fetch(request, env, createExecutionContext());
  };

  keysSent(path: string): Array<string | null> {
    return this.requests.filter((r) => new URL(r.url).pathname === path).map((r) => r.headers["idempotency-key"] ?? null);
  }
}

/** An `afterRun` hook whose first call throws: the worker "dies" after the side effect, before its settle. */
export function crashOnce(): NonNullable<StepRuntime["afterRun"]> {
  let crashed = false;
  return () => {
    if (crashed) return;
    crashed = true;
    throw new Error("worker died after the side effect");
  };
}

let counter = 0;
export function unique(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Saves a workflow on its workspace's shard (test/helpers/shards.ts), where the engine will look for it. */
export async function seedWorkflow(workspace: string, input: WorkflowDefinitionInput, db = dbOf(env, workspace)): Promise<StoredWorkflow> {
  const definition = WorkflowDefinition.parse(input);
  await saveWorkflow(db, workspace, definition, Date.now());
  return (await getWorkflow(db, workspace, definition.id))!;
}

/** The queue result plus the retry delays (which `getQueueResult` does not report). */
export interface Delivery extends QueueResult {
  retryDelays: Array<number | undefined>;
}

/** A view of the batch whose `retry()` records the delay asked for, then forwards. */
function recordingBatch(batch: MessageBatch<unknown>, delays: Array<number | undefined>): MessageBatch<unknown> {
  return {
    queue: batch.queue,
    messages: batch.messages.map((m) => ({
      id: m.id,
      timestamp: m.timestamp,
      body: m.body,
      attempts: m.attempts,
      ack: () => m.ack(),
      retry: (options?: QueueRetryOptions) => {
        delays.push(options?.delaySeconds);
        m.retry(options);
      },
    })),
    ackAll: () => batch.ackAll(),
    retryAll: (options?: QueueRetryOptions) => batch.retryAll(options),
  } as unknown as MessageBatch<unknown>;
}

export interface Harness {
  clock: Clock;
  queue: CapturingQueue;
  dest: Destination;
  rt: StepRuntime;
  start(workflow: StoredWorkflow, payload: unknown): Promise<string>;
  /** A start over of `from` on the harness's clock, straight to ingress (the route's early checks skipped). */
  startOver(workflow: StoredWorkflow, payload: unknown, from: string): Promise<StartResult>;
  /** `attempts`: the queue's delivery count the messages carry (1 = first delivery). */
  deliver(bodies: unknown[], rt?: Partial<StepRuntime>, attempts?: number): Promise<Delivery>;
  /** Deliver pending messages one at a time in due order (advancing the clock) until none are left. */
  drain(maxRounds?: number): Promise<number>;
}

export interface HarnessOptions {
  /**
   * Step chaining (src/steps/chain.ts), opt-in: `true` for the defaults, or a configuration. Off
   * otherwise, whatever the environment says. With it, `start` runs the first step inline (as the
   * trigger does under `ctx.waitUntil`) through `rt.db`, and resolves once that inline work ended.
   */
  chain?: true | Partial<ChainConfig>;
  /**
   * The workspace whose executions this harness runs: its shard's database is the harness's (the
   * runtime's and the start batch's), as the engine's entry points would choose it (SPEC section 13).
   * Default: the test's `env.DB`.
   */
  workspace?: string;
  /** The database the harness runs on (its runtime's and its start batch's), whatever the workspace. */
  database?: D1Database;
}

export function harness(overrides: Partial<StepRuntime> = {}, options: HarnessOptions = {}): Harness {
  const chain: ChainConfig | null = options.chain ? { ...DEFAULT_CHAIN, ...(options.chain === true ? {} : options.chain) } : null;
  const clock = new Clock();
  const queue = new CapturingQueue(clock);
  const dest = new Destination(unique("dest"));
  const db = options.database ?? (options.workspace === undefined ? env.DB : dbOf(env, options.workspace));
  const rt = defaultRuntime(env, {
    db,
    now: clock.now,
    queue,
    fetch: dest.fetch,
    random: () => 0.5,
    reapEveryMs: null,
    heartbeatEveryMs: 0,
    chain,
    ...overrides,
  });
  let ids = 0;
  const inline: Array<Promise<unknown>> = [];
  const ingress: IngressDeps = { db, queue: queue as unknown as Queue<StepMessage>, now: clock.now };
  if (rt.chain) {
    ingress.db = rt.db;
    ingress.chain = { runtime: rt, waitUntil: (work) => inline.push(work) };
  }
  const h: Harness = {
    clock,
    queue,
    dest,
    rt,
    async start(workflow, payload) {
      const result = await startWorkflowExecution(ingress, { workflow, triggerKind: "test", payload, identity: { kind: "forced" } });
      await Promise.all(inline.splice(0));
      return result.executionId;
    },
    async startOver(workflow, payload, from) {
      const result = await startWorkflowExecution(ingress, {
        workflow,
        triggerKind: "start_over",
        payload,
        identity: { kind: "forced" },
        startedOverFrom: from,
      });
      await Promise.all(inline.splice(0));
      return result;
    },
    async deliver(bodies, more = {}, attempts = 1) {
      const batch = createMessageBatch<unknown>(
        "idemflow-steps",
        bodies.map((body) => ({ id: `msg-${++ids}`, timestamp: new Date(clock.now()), attempts, body })),
      );
      const ctx = createExecutionContext();
      const retryDelays: Array<number | undefined> = [];
      await handleStepBatch(recordingBatch(batch, retryDelays), env, ctx, { ...rt, ...more });
      return { ...(await getQueueResult(batch, ctx)), retryDelays };
    },
    async drain(maxRounds = 100) {
      let rounds = 0;
      while (queue.pending.length > 0 && rounds < maxRounds) {
        rounds++;
        queue.pending.sort((a, b) => a.dueAt - b.dueAt);
        const next = queue.pending.shift()!;
        if (next.dueAt > clock.now()) clock.t = next.dueAt;
        const result = await h.deliver([next.body]);
        for (const d of result.retryDelays) queue.pending.push({ body: next.body, dueAt: clock.now() + (d ?? 0) * 1000 });
      }
      return rounds;
    },
  };
  return h;
}

/**
 * The harness with the demo destinations (demo/src/app.ts: the forgetful payments API, …) served
 * in-process on the harness's clock; the demo's tables must exist (test/helpers/demo-tables.ts).
 */
export function demoHarness(options: { clockAt?: number } = {}): Harness {
  const h: Harness = harness({
    fetch: async (input, init) => {
      const request = new Request(input as RequestInfo, init);
      h.dest.requests.push({ method: request.method, url: request.url, headers: Object.fromEntries(request.headers), body: "" });
      const ctx = createExecutionContext();
      const response = await demo.fetch(request, env, ctx);
      await waitOnExecutionContext(ctx);
      return response;
    },
  });
  if (options.clockAt !== undefined) h.clock.t = options.clockAt;
  const demo = createDemoApp({ now: h.clock.now });
  return h;
}

export interface StepView {
  vertex_id: string;
  state: string;
  epoch: number;
  attempt: number;
  idempotency_key: string | null;
  output: string | null;
  error: string | null;
}

export async function stepsOf(executionId: string, db: D1Database = env.DB): Promise<Record<string, StepView>> {
  const { results } = await db.prepare("SELECT * FROM steps WHERE execution_id = ?1").bind(executionId).all<StepView>();
  return Object.fromEntries(results.map((r) => [r.vertex_id, r]));
}

export async function executionStatus(executionId: string, db: D1Database = env.DB): Promise<string | undefined> {
  return (await db.prepare("SELECT status FROM executions WHERE id = ?1").bind(executionId).first<{ status: string }>())?.status;
}

/** entry → charge (Gateway with a business-derived key) → done (TRANSFORM). */
export function chargeWorkflow(id: string, charge: Record<string, unknown> = {}): WorkflowDefinitionInput {
  return {
    id,
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "charge",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}/payments/charges`,
          headers: {
            "Idempotency-Key": "= $idempotencyKey('charge', payload.order.id)",
            Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}",
          },
          body: "= { 'order': payload.order.id, 'amount': payload.order.total }",
          retry: { maxAttempts: 3, backoff: "exponential", initialDelayMs: 1000, maxDelayMs: 10_000 },
          ...charge,
        },
      },
      { id: "done", type: "TRANSFORM", config: { output: { charged: "= steps.charge.body.id" } } },
    ],
    edges: [
      { from: "received", to: "charge" },
      { from: "charge", to: "done" },
    ],
  } as WorkflowDefinitionInput;
}

/** Every row of every table, as one string: secret-canary tests search it. */
/** Every row of every table of every shard, as one string (a leak scan looks everywhere). */
export async function dumpEveryTable(): Promise<string> {
  let dump = "";
  for (const db of new Set([env.DB, env.DB_1, ...(env.TEST_SHARD_0 ? [env.TEST_SHARD_0] : [])])) {
    const { results } = await db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name <> " +
          "'d1_migrations'",
      )
      .all<{ name: string }>();
    for (const { name } of results) dump += JSON.stringify((await db.prepare(`SELECT * FROM "${name}"`).all()).results);
  }
  return dump;
}

/**
 * A request to the real app (the operator routes, the trace), with the step queue swapped for the
 * harness's so the test decides when each message is delivered. `token` defaults to `dev-token`
 * (workspace `dev`); a string `body` is sent as is, anything else as JSON.
 */
export async function callApp(
  h: Harness,
  method: string,
  path: string,
  init: { token?: string; key?: string; body?: unknown } = {},
): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${init.token ?? "dev-token"}` };
  if (init.key) headers["idempotency-key"] = init.key;
  if (init.body !== undefined) headers["content-type"] = "application/json";
  const body = init.body === undefined ? undefined : typeof init.body === "string" ? init.body : JSON.stringify(init.body);
  const ctx = createExecutionContext();
  const response = await app.fetch(new Request(`http://idemflow.test${path}`, { method, headers, body }), { ...env, QUEUE: h.queue }, ctx);
  await waitOnExecutionContext(ctx);
  return response;
}

/** A charge execution in `workspace` whose charge failed for good (three 500s): FAILED. */
export async function failedCharge(h: Harness, workspace: string): Promise<{ wf: StoredWorkflow; id: string }> {
  const wf = await seedWorkflow(workspace, chargeWorkflow(unique("wf")));
  const id = await h.start(wf, { order: { id: unique("O"), total: 12 } });
  h.dest.fault("/payments/charges", 500, 3);
  await h.drain();
  return { wf, id };
}

/**
 * A charge execution in `workspace` whose charge was claimed twice: the worker of epoch 1 stalled,
 * its lease ran out and a takeover claimed it under epoch 2 — the stale worker and the current one of
 * a settle's fence tests. The start's message is taken, so nothing runs the charge meanwhile.
 */
export async function takenOverCharge(h: Harness, workspace: string): Promise<{ wf: StoredWorkflow; id: string }> {
  const wf = await seedWorkflow(workspace, chargeWorkflow(unique("wf")));
  const id = await h.start(wf, { order: { id: unique("O"), total: 4 } });
  h.queue.take();
  for (const epoch of [1, 2]) {
    if (epoch === 2) h.clock.advance(5_000);
    const { claimed } = await claimAndLoad(env.DB, { executionId: id, vertexId: "charge" }, h.clock.now(), 1_000);
    if (claimed?.epoch !== epoch) throw new Error(`takenOverCharge: the claim of epoch ${epoch} got ${JSON.stringify(claimed)}`);
  }
  return { wf, id };
}
