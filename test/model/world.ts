/**
 * One run of the model test over the real engine: the real app (`app.fetch`), the real queue
 * handler (`handleQueueBatch`), the real cron (`runScheduled`: the history sweep, the reaper, …)
 * and erasure (DELETE /v1/executions/{id}), on local D1, two shards, in virtual time through the
 * clock seam (src/lib/clock.ts). The destination is the harness's (test/steps/helpers.ts): the real
 * Idempotency-Key ledger middleware, recording every effect per key. Only the network boundary is
 * intercepted (`fetch` to the destination), and the queue is held so the run decides when (and
 * whether) each message is delivered.
 *
 * Every run has its own three workspaces (0 and 1 on shard 0, 2 on shard 1) and starts later in
 * virtual time than every run before it in the file, so runs never see each other's rows.
 */
import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  env,
  getQueueResult,
  waitOnExecutionContext,
} from "cloudflare:test";
import { vi } from "vitest";
import { app } from "../../src/app";
import { withClock } from "../../src/lib/clock";
import { handleQueueBatch } from "../../src/queue";
import { runScheduled } from "../../src/scheduled";
import { handleStepBatch } from "../../src/steps/consumer";
import { reap } from "../../src/steps/reaper";
import { defaultRuntime } from "../../src/steps/runtime";
import { shardEnv } from "../../src/shards/shard-env";
import { Hono } from "hono";
import { idempotency } from "../../src/http/idempotency";
import { DEST } from "../steps/helpers";
import { deliveredEnv } from "../helpers/shards";
import { ADVANCES_MS, WORKSPACES, type Op, type WorkflowName } from "./ops";
import { applyParkOp, checkPark, setupPark } from "./ops-comp-operator";
import { checkAttempts } from "./world-attempts";
import { checkEntry } from "./world-entry";
import { applyCompOp, checkComp, setupComp } from "./ops-compensation";
import { applyFlowOp, checkFlow, setupFlow } from "./ops-flow";
import { applyKeysOp, checkKeys, checkKeySearch, KEYS_HOT, keysWorkflow } from "./ops-keys";
import { applyMapOp, checkMap, setupMap } from "./ops-map";
import { checkNotify, setupNotify } from "./ops-notify";

/** A broken invariant: the run stops at the first. */
export class Violation extends Error {
  constructor(
    readonly invariant: string,
    detail: string,
  ) {
    super(`${invariant}: ${detail}`);
    this.name = "Violation";
  }
}

const HISTORY = { completed: "2m", failed: "2m", cancelled: "2m" };
const ENTRY = (fields: string) => ({ id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: fields, dedupeWindow: "1m" } });

/** The run's workflows: a charge keyed on the business id (and a label keyed on the payload's note), and two waits. */
export const MODEL_WORKFLOWS: Record<WorkflowName, unknown> = {
  charge: {
    id: "charge",
    history: HISTORY,
    vertices: [
      ENTRY("order.id"),
      {
        id: "charge",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}/payments/charges`,
          headers: { "Idempotency-Key": "= $idempotencyKey('charge', payload.order.id)" },
          body: "= { 'order': payload.order.id }",
          retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000 },
        },
      },
      {
        id: "label",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}/shipping/labels`,
          headers: { "Idempotency-Key": "= $idempotencyKey('label', payload.note)" },
          body: "= { 'order': payload.order.id, 'note': payload.note }",
          retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000 },
        },
      },
    ],
    edges: [
      { from: "entry", to: "charge" },
      { from: "charge", to: "label" },
    ],
  },
  waitOne: waitWorkflow("waitOne", "one"),
  waitAll: waitWorkflow("waitAll", "all"),
};

function waitWorkflow(id: string, consume: "one" | "all") {
  return {
    id,
    history: HISTORY,
    vertices: [
      ENTRY("customer"),
      {
        id: "paid",
        type: "WAIT_FOR_EVENT",
        config: { event: "paid", match: "= payload.order.id", timeout: "5m", onTimeout: "continue", consume },
      },
      { id: "done", type: "TRANSFORM", config: { output: "= { 'order': payload.order.id }" } },
    ],
    edges: [
      { from: "entry", to: "paid" },
      { from: "paid", to: "done" },
    ],
  };
}

interface Pending {
  body: unknown;
  dueAt: number;
  attempts: number;
}

/** What the model knows of an execution it was given. */
interface Known {
  ws: number;
  wf: WorkflowName;
  /** The trigger identity (workspace, workflow, business value); a start over keeps its source's. */
  identity: string;
  /** The payload's unique note: the business data an erasure must remove. */
  note: string;
  order: string | null;
  erased: boolean;
}

let runCounter = 0;
/** The destination of the world running now (the fetch interceptor sends to it). */
let activeDest: ModelDestination | null = null;

/**
 * The destination: the harness's (test/steps/helpers.ts `Destination`) on the run's virtual clock —
 * the real Idempotency-Key ledger middleware records keys at the time the engine's sweeps read, so
 * a cron tick never expires a key the destination would still honour. Every handler run is an effect.
 */
export class ModelDestination {
  effects: Array<{ path: string; key: string | null; body: unknown }> = [];
  /** Every request, with the virtual time it arrived (`at`: ./ops-keys.ts checks when a key came again). */
  requests: Array<{ url: string; headers: Record<string, string>; body: string; at: number }> = [];
  private faults: Array<{ path: string; status: number }> = [];
  private readonly app = new Hono();

  constructor(
    readonly principal: string,
    private readonly now: () => number,
  ) {
    // Keys kept a year: longer than any retry the model lets the engine make (a destination that
    // forgets a key within a retry's reach double-charges by design; the retention guard is for declared ones).
    const guarded = idempotency({ principal: () => this.principal, database: () => env.DB, now, retentionMs: 365 * 86_400_000 });
    for (const path of ["/payments/charges", "/payments/refunds", "/shipping/labels"]) {
      this.app.post(path, guarded, async (c) => {
        const body = (await c.req.json().catch(() => null)) as unknown;
        this.effects.push({ path, key: c.req.header("idempotency-key") ?? null, body });
        return c.json({ id: `ch_${this.effects.length}` }, 201);
      });
    }
  }

  /** The next request to `path` is handled (the effect happens), then answered `status`. */
  fault(path: string, status: number): void {
    this.faults.push({ path, status });
  }

  fetch: typeof fetch = async (input, init) => {
    const request = new Request(input as RequestInfo, init);
    this.requests.push({
      url: request.url,
      headers: Object.fromEntries(request.headers),
      body: await request.clone().text(),
      at: this.now(),
    });
    const path = new URL(request.url).pathname;
    const ctx = createExecutionContext();
    const response = await this.app.fetch(request, env, ctx);
    await waitOnExecutionContext(ctx);
    const i = this.faults.findIndex((f) => f.path === path);
    if (i < 0) return response;
    const [f] = this.faults.splice(i, 1);
    return new Response(JSON.stringify({ error: "scripted" }), { status: f!.status, headers: { "content-type": "application/json" } });
  };
}

/** Sends the engine's calls to the destination host to the running world's destination (the network boundary only). */
export function interceptDestination(): void {
  const realFetch = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation((input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    return url.host === "localhost:8788" && activeDest ? activeDest.fetch(input, init) : realFetch(input, init);
  });
}
/** Virtual time only moves forward over the file: each run starts after the last one ended. */
let fileClock = 1_950_000_000_000;

/** Tables an erasure keeps rows naming the erased ids in, by design (docs/history.md "Erasure"). */
const KEPT_BY_ERASURE = new Set(["execution_tombstones", "execution_identities", "destination_key_sends"]);

/** The tables whose rows change without any workspace operation (counters, leases, rollups): never compared. */
const VOLATILE = new Set([
  "history_counters",
  "sweep_leases",
  "sweep_cursors",
  "stats_rollup_marks",
  "stats_hourly",
  "d1_migrations",
  "sqlite_sequence",
]);

export class World {
  readonly run = ++runCounter;
  t: number;
  readonly names: string[];
  readonly tag: string;
  readonly env: Env;
  readonly dest = new ModelDestination(`model-dest-${this.run}-${crypto.randomUUID().slice(0, 6)}`, () => this.t);
  pending: Pending[] = [];
  readonly known = new Map<string, Known>();
  /** The last payload per workspace and workflow (`again` re-sends it). */
  readonly lastPayload = new Map<
    string,
    { payload: unknown; client: number | null; identity: string; note: string; order: string | null }
  >();
  /** The order index the last wait trigger of each workspace named (`follow` aims at it). */
  readonly lastWaitOrder = new Map<number, number>();
  readonly log: string[] = [];
  private keys = 0;
  private notes = 0;
  private columns: Map<string, string[]> | null = null;

  constructor() {
    activeDest = this.dest;
    fileClock += 40 * 86_400_000;
    this.t = fileClock;
    this.tag = `m${this.run}-${crypto.randomUUID().slice(0, 4)}`;
    this.names = Array.from({ length: WORKSPACES }, (_, i) => `${this.tag}-${"abc"[i]}`);
    const queue = {
      send: async (body: unknown, options?: QueueSendOptions) => void this.enqueue(body, options?.delaySeconds),
      sendBatch: async (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
        for (const m of messages) this.enqueue(m.body, m.delaySeconds ?? options?.delaySeconds);
      },
    };
    const base = {
      ...deliveredEnv(env),
      QUEUE: queue,
      CHAIN_STEPS: "off",
      D1_SHARDS: "DB,DB_1",
      WORKSPACE_SHARDS: `${this.names[0]}:0,${this.names[1]}:0,${this.names[2]}:1`,
      API_TOKENS: this.names.map((n) => `${n}-token:${n}`).join(","),
      EVENT_BUFFER: "2m",
      EVENT_DEDUPE_WINDOW: "2m",
      EVENT_HISTORY: "5m",
      KEY_MEMORY_HOT: KEYS_HOT,
    } as unknown as Env;
    this.env = withClock(base, () => this.t);
  }

  /** Order ids are the run's own: keys built from them never meet another run's (the reaper re-sends earlier runs' abandoned steps too). */
  order(n: number): string {
    return `${this.tag}-o${n}`;
  }

  private enqueue(body: unknown, delaySeconds: number | undefined): void {
    this.pending.push({ body, dueAt: this.t + (delaySeconds ?? 0) * 1000, attempts: 1 });
  }

  shardOf(ws: number): number {
    return ws === 2 ? 1 : 0;
  }

  dbOf(ws: number): D1Database {
    return this.shardEnv(this.shardOf(ws)).DB;
  }

  shardEnv(shard: number): Env {
    return shardEnv(this.env, shard);
  }

  /** Saves the workflows in every workspace (through the route). */
  async setup(): Promise<void> {
    for (let ws = 0; ws < WORKSPACES; ws++) {
      for (const [name, definition] of Object.entries(MODEL_WORKFLOWS)) {
        const res = await this.call(ws, "PUT", `/v1/workflows/${name}`, definition);
        if (res.status >= 300) throw new Error(`saving ${name}: ${res.status} ${await res.text()}`);
      }
      await setupFlow(this, ws, DEST);
      await setupMap(this, ws, DEST);
      await setupComp(this, ws, DEST);
      await setupPark(this, ws, DEST);
      await setupNotify(this, ws, DEST);
      const keys = await this.call(ws, "PUT", `/v1/workflows/${(keysWorkflow(DEST) as { id: string }).id}`, keysWorkflow(DEST));
      if (keys.status >= 300) throw new Error(`saving the guarded workflow: ${keys.status} ${await keys.text()}`);
    }
  }

  async call(ws: number, method: string, path: string, body?: unknown, key = false): Promise<Response> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.names[ws]}-token` };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (key) headers["idempotency-key"] = `model-${this.run}-${++this.keys}`;
    const ctx = createExecutionContext();
    const res = await app.fetch(
      new Request(`http://idemflow.test${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }),
      this.env,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    return res;
  }

  // ---------------------------------------------------------------- operations

  async apply(op: Op): Promise<void> {
    switch (op.t) {
      case "trigger":
        return this.trigger(op);
      case "event":
        return this.event(op);
      case "advance":
        this.t += op.ms;
        return;
      case "deliver":
        await this.deliver(op.all ? Infinity : 1);
        return;
      case "drop": {
        const i = this.firstDue();
        if (i >= 0) this.pending.splice(i, 1);
        return;
      }
      case "crash":
        return this.crash();
      case "fault":
        this.dest.fault("/payments/charges", 500);
        return;
      case "cron":
        return this.cron();
      case "erase":
        return this.erase(op.ws, op.pick, op.taker);
      case "cancel": {
        const id = this.pick(op.ws, op.pick);
        if (!id) return;
        await this.scoped(op.ws, () => this.call(op.ws, "POST", `/v1/executions/${id}/cancel`, { releaseIdentity: op.release }, true));
        return;
      }
      case "startOver":
        return this.startOver(op.ws, op.pick);
      case "retry":
        return this.retry(op.ws, op.pick);
      case "settle":
        return this.settle();
      case "flowSend":
      case "flowLimits":
        return applyFlowOp(this, op, DEST);
      case "keySend":
        return applyKeysOp(this, op);
      case "mapSend":
        return applyMapOp(this, op);
      case "compSend":
      case "compFault":
      case "compCrash":
      case "compRedeliver":
      case "compRetry":
      case "compCancel":
      case "compStartOver":
        return applyCompOp(this, op);
      case "parkSend":
      case "parkRetry":
      case "parkResolve":
      case "parkDuel":
        return applyParkOp(this, op);
    }
  }

  private async trigger(op: Extract<Op, { t: "trigger" }>): Promise<void> {
    const slot = `${op.ws}/${op.wf}`;
    const last = this.lastPayload.get(slot);
    let payload: unknown;
    let client = op.client;
    let identity: string;
    let note: string;
    let order: string | null;
    if (op.again && last) {
      ({ payload, client, identity, note, order } = last);
    } else {
      note = `note-${this.run}-${++this.notes}-${crypto.randomUUID().slice(0, 6)}`;
      // `follow`: the order an open wait waits for, as the other customer (a second wait on the same event).
      const followed = op.follow && op.wf !== "charge" && op.order !== null ? await this.waited(op.ws) : undefined;
      const index = followed?.order ?? op.order;
      const customer = followed && followed.customer !== null ? (followed.customer + 1) % 2 : op.customer;
      if (op.wf !== "charge" && index !== null) this.lastWaitOrder.set(op.ws, index);
      order = index === null ? null : this.order(index);
      payload = { ...(order === null ? {} : { order: { id: order, total: 10 } }), customer: `c${customer}`, note };
      const value = client !== null ? `client:${client}` : op.wf === "charge" ? `order:${order}` : `customer:c${customer}`;
      identity = `${op.ws}/${op.wf}/${value}`;
      this.lastPayload.set(slot, { payload, client, identity, note, order });
    }
    const query = client === null ? "" : `?clientIdempotencyId=cid-${client}`;
    // The trigger route reaps its shard after answering (src/ingress/heal.ts); reap first at this
    // time, so what the route's reap may re-send is only what this trigger did.
    await this.reapShard(this.shardOf(op.ws));
    const res = await this.scoped(op.ws, () => this.call(op.ws, "POST", `/v1/workflows/${op.wf}/trigger${query}`, payload));
    if (res.status >= 500) throw new Violation("no 5xx", `trigger answered ${res.status}: ${await res.text()}`);
    if (res.status >= 300) return; // refused (an absent field): nothing started
    const answer = (await res.json()) as { executionId: string; deduplicated: boolean };
    const seen = this.known.get(answer.executionId);
    if (!answer.deduplicated) {
      if (seen) {
        throw new Violation(
          "an execution id is never given to two runs",
          `trigger of ${identity} started ${answer.executionId}, ` +
            `already given to ${seen.identity} (${seen.erased ? "erased" : "swept or live"})`,
        );
      }
      this.known.set(answer.executionId, { ws: op.ws, wf: op.wf, identity, note, order, erased: false });
    } else if (seen && seen.identity !== identity) {
      throw new Violation(
        "a duplicate names its own identity's execution",
        `trigger of ${identity} answered ${answer.executionId} of ${seen.identity}`,
      );
    }
  }

  private async event(op: Extract<Op, { t: "event" }>): Promise<void> {
    const match = this.order((op.follow ? (await this.waited(op.ws))?.order : undefined) ?? op.match);
    const body = { name: "paid", match, ...(op.id === null ? {} : { id: `ev-${op.id}` }), data: { order: match } };
    const res = await this.scoped(op.ws, () => this.call(op.ws, "POST", "/v1/events", body));
    if (res.status >= 500) throw new Violation("no 5xx", `event answered ${res.status}: ${await res.text()}`);
    if (res.status !== 202) return; // a duplicate (200) or refused
    const answer = (await res.json()) as { resumed: string[]; buffered: boolean };
    for (const id of answer.resumed) {
      const k = this.known.get(id);
      if (!k || k.ws !== op.ws || k.order !== match) {
        throw new Violation(
          "an event resumes only waits on its workspace, name and match",
          `${JSON.stringify(body)} in ws ${op.ws} resumed ${id} (${JSON.stringify(k)})`,
        );
      }
    }
    if (answer.buffered) {
      const row = await this.dbOf(op.ws)
        .prepare("SELECT consumed_at FROM events WHERE workspace = ?1 ORDER BY received_at DESC, rowid DESC LIMIT 1")
        .bind(this.names[op.ws])
        .first<{ consumed_at: number | null }>();
      if (row?.consumed_at !== null) {
        throw new Violation(
          "an event answered `buffered` is not taken by nobody",
          `${JSON.stringify(body)} in ws ${op.ws}: its row says consumed_at ${row?.consumed_at}`,
        );
      }
    }
  }

  private firstDue(): number {
    let best = -1;
    for (let i = 0; i < this.pending.length; i++) {
      if (this.pending[i]!.dueAt <= this.t && (best < 0 || this.pending[i]!.dueAt < this.pending[best]!.dueAt)) best = i;
    }
    return best;
  }

  /** Delivers up to `max` due messages as one batch through the Worker's queue handler; retried ones go back with their delay. */
  async deliver(max: number): Promise<number> {
    const due = this.pending
      .filter((p) => p.dueAt <= this.t)
      .sort((a, b) => a.dueAt - b.dueAt)
      .slice(0, Math.min(max, 50));
    if (due.length === 0) return 0;
    this.pending = this.pending.filter((p) => !due.includes(p));
    const batch = createMessageBatch<unknown>(
      "idemflow-steps",
      due.map((p, i) => ({ id: `m${i}`, timestamp: new Date(this.t), attempts: p.attempts, body: p.body })),
    );
    const ctx = createExecutionContext();
    await handleQueueBatch(batch, this.env, ctx);
    await waitOnExecutionContext(ctx);
    const result = await getQueueResult(batch, ctx);
    for (const retry of result.retryMessages) {
      const p = due[Number(retry.msgId.slice(1))]!;
      // The queue's max_retries: past it the message would go to the dead-letter queue; the reaper covers its step.
      if (p.attempts < 10) this.pending.push({ body: p.body, dueAt: this.t + (retry.delaySeconds ?? 0) * 1000, attempts: p.attempts + 1 });
    }
    return due.length;
  }

  private async crash(): Promise<void> {
    const i = this.firstDue();
    if (i < 0) return;
    const [p] = this.pending.splice(i, 1);
    const body = p!.body as { shard?: number };
    if (typeof body !== "object" || body === null || "sweep" in body) {
      this.pending.push(p!);
      return;
    }
    const se = this.shardEnv(body.shard ?? 0);
    const batch = createMessageBatch<unknown>("idemflow-steps", [{ id: "c0", timestamp: new Date(this.t), attempts: p!.attempts, body }]);
    const ctx = createExecutionContext();
    const died = () => {
      throw new Error("model: the worker died after the side effect");
    };
    await handleStepBatch(batch, se, ctx, defaultRuntime(se, { afterRun: died, reapEveryMs: null }));
    await waitOnExecutionContext(ctx);
    const result = await getQueueResult(batch, ctx);
    for (const retry of result.retryMessages)
      this.pending.push({ body, dueAt: this.t + (retry.delaySeconds ?? 0) * 1000, attempts: p!.attempts + 1 });
  }

  async cron(): Promise<void> {
    const ctx = createExecutionContext();
    await runScheduled(createScheduledController({ cron: "* * * * *", scheduledTime: this.t }), this.env, ctx);
    await waitOnExecutionContext(ctx);
  }

  private async reapShard(shard: number): Promise<void> {
    const se = this.shardEnv(shard);
    await reap(defaultRuntime(se, { reapEveryMs: null }));
  }

  /**
   * The order index of the ws's oldest open, unserved wait, with its customer; else of its last wait
   * trigger (customer unknown).
   */
  private async waited(ws: number): Promise<{ order: number; customer: number | null } | undefined> {
    const row = await this.dbOf(ws)
      .prepare(
        `SELECT w.match_value, json_extract(x.payload, '$.customer') AS customer
         FROM event_waits w JOIN executions x ON x.id = w.execution_id
         WHERE w.workspace = ?1 AND w.timed_out = 0 AND w.timeout_at > ?2
           AND NOT EXISTS (SELECT 1 FROM event_consumptions c WHERE c.wait_key = w.wait_key)
         ORDER BY w.registered_at LIMIT 1`,
      )
      .bind(this.names[ws], this.t)
      .first<{ match_value: string; customer: unknown }>();
    const prefix = `${this.tag}-o`;
    const value = row ? (JSON.parse(row.match_value) as unknown) : null;
    if (typeof value === "string" && value.startsWith(prefix)) {
      const customer = typeof row?.customer === "string" ? Number(row.customer.slice(1)) : null;
      return { order: Number(value.slice(prefix.length)), customer };
    }
    const order = this.lastWaitOrder.get(ws);
    return order === undefined ? undefined : { order, customer: null };
  }

  /** The ws's `pick`-th execution the model knows of (erased ones included: the engine must answer them sanely). */
  private pick(ws: number, pick: number): string | undefined {
    const ids = [...this.known].filter(([, k]) => k.ws === ws).map(([id]) => id);
    return ids.length === 0 ? undefined : ids[pick % ids.length];
  }

  /**
   * The ws's `pick`-th execution (not erased) that took an event — of those, one whose event another
   * execution took too (a broadcast, or a `one` wait beside `all` ones) when there is one.
   */
  private async pickTaker(opWs: number, pick: number): Promise<{ ws: number; id: string } | undefined> {
    let fallback: { ws: number; id: string } | undefined;
    for (let i = 0; i < WORKSPACES; i++) {
      const ws = (opWs + i) % WORKSPACES;
      const found = await this.takerIn(ws, pick);
      if (found?.shared) return { ws, id: found.id };
      if (found && !fallback && ws === opWs) fallback = { ws, id: found.id };
    }
    return fallback;
  }

  private async takerIn(ws: number, pick: number): Promise<{ id: string; shared: boolean } | undefined> {
    const { results } = await this.dbOf(ws)
      .prepare(
        `SELECT c.execution_id, (SELECT count(*) FROM event_consumptions o WHERE o.event_rowid = c.event_rowid) AS takers
         FROM event_consumptions c JOIN event_waits w ON w.wait_key = c.wait_key
         JOIN executions x ON x.id = c.execution_id AND x.status <> 'RUNNING'
         WHERE w.workspace = ?1 ORDER BY c.execution_id`,
      )
      .bind(this.names[ws])
      .all<{ execution_id: string; takers: number }>();
    const takers = results.filter((r) => this.known.get(r.execution_id)?.erased === false);
    const shared = takers.filter((r) => r.takers > 1);
    const from = shared.length > 0 ? shared : takers;
    return from.length === 0 ? undefined : { id: from[pick % from.length]!.execution_id, shared: shared.length > 0 };
  }

  private async startOver(ws: number, pick: number): Promise<void> {
    const from = this.pick(ws, pick);
    if (!from) return;
    const res = await this.scoped(ws, () => this.call(ws, "POST", `/v1/executions/${from}/start-over`, undefined, true));
    if (res.status >= 500) throw new Violation("no 5xx", `start-over answered ${res.status}: ${await res.text()}`);
    if (res.status !== 202) return;
    const answer = (await res.json()) as { executionId: string; deduplicated: boolean };
    if (answer.deduplicated) return;
    const seen = this.known.get(answer.executionId);
    if (seen)
      throw new Violation(
        "an execution id is never given to two runs",
        `start-over of ${from} started ${answer.executionId}, already given`,
      );
    this.known.set(answer.executionId, { ...this.known.get(from)!, erased: false });
  }

  private async retry(ws: number, pick: number): Promise<void> {
    const { results } = await this.dbOf(ws)
      .prepare("SELECT execution_id, vertex_id FROM steps WHERE workspace = ?1 AND state = 'FAILED' ORDER BY execution_id, vertex_id")
      .bind(this.names[ws])
      .all<{ execution_id: string; vertex_id: string }>();
    const step = results[pick % Math.max(1, results.length)];
    if (!step) return;
    const res = await this.scoped(ws, () =>
      this.call(ws, "POST", `/v1/executions/${step.execution_id}/steps/${step.vertex_id}/retry`, {}, true),
    );
    if (res.status >= 500) throw new Violation("no 5xx", `retry answered ${res.status}: ${await res.text()}`);
  }

  private async erase(opWs: number, pick: number, taker = false): Promise<void> {
    const aimed = taker ? await this.pickTaker(opWs, pick) : undefined;
    const ws = aimed?.ws ?? opWs;
    const id = aimed?.id ?? this.pick(ws, pick);
    if (!id) return;
    const before = await this.dump();
    const res = await this.scoped(ws, () => this.call(ws, "DELETE", `/v1/executions/${id}`, undefined, true));
    if (res.status >= 500) throw new Violation("no 5xx", `erase answered ${res.status}: ${await res.text()}`);
    if (res.status !== 200) return;
    const { erased } = (await res.json()) as { erased: string[] };
    for (const e of erased) {
      const k = this.known.get(e);
      if (k) k.erased = true;
    }
    await this.checkErasure(ws, erased, before);
  }

  /** Past every timeout; cron and the queue until nothing is left; then no execution may still run. */
  async settle(): Promise<void> {
    this.t += 10 * 60_000;
    for (let round = 0; round < 60; round++) {
      await this.cron();
      while ((await this.deliver(Infinity)) > 0) {
        /* deliver until nothing is due now */
      }
      if (this.pending.length === 0) break;
      this.t = Math.max(this.t + 1_000, Math.min(...this.pending.map((p) => p.dueAt)));
    }
    const stuck = await this.running();
    if (stuck.length > 0)
      throw new Violation("after every timeout passed and the queue drained, nothing is stuck", `still RUNNING: ${JSON.stringify(stuck)}`);
  }

  private async running(): Promise<Array<{ id: string; workflow_id: string; steps: string }>> {
    const out: Array<{ id: string; workflow_id: string; steps: string }> = [];
    for (let ws = 0; ws < WORKSPACES; ws++) {
      const { results } = await this.dbOf(ws)
        .prepare(
          `SELECT e.id, e.workflow_id,
                  (SELECT group_concat(s.vertex_id || ':' || s.state, ',') FROM steps s WHERE s.execution_id = e.id) AS steps
           FROM executions e WHERE e.workspace = ?1 AND e.status IN ('RUNNING', 'COMPENSATING')`,
        )
        .bind(this.names[ws])
        .all<{ id: string; workflow_id: string; steps: string }>();
      out.push(...results);
    }
    return out;
  }

  // ---------------------------------------------------------------- invariants

  /** The invariants checked after every operation. */
  async check(): Promise<void> {
    // At most one live execution per (workspace, workflow, trigger identity), start overs counted with their source's identity.
    const live = new Map<string, string>();
    for (const r of await this.running()) {
      const k = this.known.get(r.id);
      if (!k) continue;
      const other = live.get(k.identity);
      if (other) throw new Violation("at most one live execution per trigger identity", `${k.identity}: ${other} and ${r.id} both RUNNING`);
      live.set(k.identity, r.id);
    }
    // Per destination key: at most one effect, and every request with the key carries one business value.
    const orders = new Map<string, Set<string>>();
    const effects = new Map<string, number>();
    for (const e of this.dest.effects) if (e.key) effects.set(e.key, (effects.get(e.key) ?? 0) + 1);
    for (const [key, n] of effects) if (n > 1) throw new Violation("per destination key, at most one effect", `${key}: ${n} effects`);
    for (const r of this.dest.requests) {
      const key = r.headers["idempotency-key"];
      if (!key) continue;
      const order = String((JSON.parse(r.body || "null") as { order?: unknown } | null)?.order);
      const set = orders.get(key) ?? new Set<string>();
      set.add(order);
      orders.set(key, set);
      if (set.size > 1) throw new Violation("every key belongs to one business value", `${key} sent for orders ${[...set].join(", ")}`);
    }
    for (const shard of [0, 1]) await this.checkEvents(shard);
    for (const shard of [0, 1]) await checkFlow(this, shard);
    for (const shard of [0, 1]) await checkMap(this, shard);
    for (const shard of [0, 1]) await checkNotify(this, shard);
    for (const shard of [0, 1]) await checkComp(this, shard);
    for (const shard of [0, 1]) await checkPark(this, shard);
    for (const shard of [0, 1]) await checkAttempts(this, shard);
    for (const shard of [0, 1]) await checkEntry(this, shard);
    checkKeys(this);
    for (let ws = 0; ws < WORKSPACES; ws++) await checkKeySearch(this, ws);
  }

  private async checkEvents(shard: number): Promise<void> {
    const db = this.shardEnv(shard).DB;
    const names = this.names.filter((_, ws) => this.shardOf(ws) === shard);
    const inRun = `(${names.map((n) => `'${n}'`).join(", ")})`;
    // A consumption never outlives its event, and names an event of its wait's workspace, name and match.
    const { results: wrong } = await db
      .prepare(
        `SELECT c.wait_key, c.execution_id, w.workspace AS wait_ws, w.name AS wait_name, w.match_value AS wait_match,
                e.workspace AS event_ws, e.name AS event_name, e.match_value AS event_match
         FROM event_consumptions c JOIN event_waits w ON w.wait_key = c.wait_key
         LEFT JOIN events e ON e.rowid = c.event_rowid
         WHERE w.workspace IN ${inRun}
           AND (e.rowid IS NULL OR e.workspace <> w.workspace OR e.name <> w.name OR e.match_hash <> w.match_hash)`,
      )
      .all();
    if (wrong.length > 0) throw new Violation("a wait takes only an event of its own workspace, name and match", JSON.stringify(wrong));
    // consume "one": an event is taken by at most one such wait.
    const { results: twice } = await db
      .prepare(
        `SELECT c.event_rowid, count(*) AS takers FROM event_consumptions c JOIN event_waits w ON w.wait_key = c.wait_key
         WHERE w.workspace IN ${inRun} AND w.consume = 'one' GROUP BY c.event_rowid HAVING count(*) > 1`,
      )
      .all();
    if (twice.length > 0) throw new Violation("an event is never taken twice by `one` waits", JSON.stringify(twice));
    // A wait's output is an event on its own match.
    const { results: outputs } = await db
      .prepare(
        `SELECT s.execution_id, s.output, e.payload FROM steps s JOIN executions e ON e.id = s.execution_id
         WHERE s.workspace IN ${inRun} AND s.vertex_id = 'paid' AND s.state = 'COMPLETED' AND s.output IS NOT NULL AND s.output <> 'null'`,
      )
      .all<{ execution_id: string; output: string; payload: string }>();
    for (const o of outputs) {
      const event = JSON.parse(o.output) as { match?: unknown };
      const order = (JSON.parse(o.payload) as { order?: { id?: unknown } }).order?.id;
      if (String(event.match) !== String(order)) {
        throw new Violation("a wait resumes only on an event of its match", `${o.execution_id} (order ${order}) took ${o.output}`);
      }
    }
    // Quiescent (nothing due): no open wait beside an event it could take (buffered, untaken, not expired).
    if (this.pending.some((p) => p.dueAt <= this.t)) return;
    const { results: missed } = await db
      .prepare(
        `SELECT w.execution_id, w.consume, e.event_id, e.received_at, e.buffered_until, w.registered_at
         FROM event_waits w JOIN steps s ON s.execution_id = w.execution_id AND s.vertex_id = w.vertex_id
         JOIN events e ON e.workspace = w.workspace AND e.name = w.name AND e.match_hash = w.match_hash
         WHERE w.workspace IN ${inRun} AND w.timed_out = 0 AND w.timeout_at > ?1 AND s.state = 'EXECUTING'
           AND NOT EXISTS (SELECT 1 FROM event_consumptions c WHERE c.wait_key = w.wait_key)
           AND e.consumed_at IS NULL AND e.buffered_until > ?1 AND e.buffered_until > w.registered_at`,
      )
      .bind(this.t)
      .all();
    if (missed.length > 0)
      throw new Violation("a buffered event is taken by the first wait that starts within its buffer", JSON.stringify(missed));
  }

  /** Runs `action` in workspace `ws`; the other workspaces' rows must not change. */
  async scoped<T>(ws: number, action: () => Promise<T>): Promise<T> {
    const others = Array.from({ length: WORKSPACES }, (_, i) => i).filter((i) => i !== ws);
    const before = await Promise.all(others.map((o) => this.workspaceRows(o)));
    const result = await action();
    const after = await Promise.all(others.map((o) => this.workspaceRows(o)));
    others.forEach((o, i) => {
      if (before[i] !== after[i]) {
        const b = before[i]!.split("\n");
        const a = new Set(after[i]!.split("\n"));
        const gone = b.filter((row) => !a.has(row)).slice(0, 3);
        const bs = new Set(b);
        const added = [...a].filter((row) => !bs.has(row)).slice(0, 3);
        throw new Violation(
          "an operation in one workspace changes no row of another",
          `op in ws ${ws} changed ws ${o}: -${JSON.stringify(gone)} +${JSON.stringify(added)}`,
        );
      }
    });
    return result;
  }

  private async tableColumns(): Promise<Map<string, string[]>> {
    if (this.columns) return this.columns;
    const db = this.shardEnv(0).DB;
    const { results } = await db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'")
      .all<{ name: string }>();
    const columns = new Map<string, string[]>();
    for (const { name } of results) {
      if (VOLATILE.has(name)) continue;
      const { results: cols } = await db.prepare(`SELECT name FROM pragma_table_info('${name}')`).all<{ name: string }>();
      columns.set(
        name,
        cols.map((c) => c.name),
      );
    }
    this.columns = columns;
    return columns;
  }

  /** Every row of workspace `ws` on its shard, one line each, sorted. */
  private async workspaceRows(ws: number): Promise<string> {
    const db = this.dbOf(ws);
    const name = this.names[ws]!;
    const ids = [...this.known].filter(([, k]) => k.ws === ws).map(([id]) => id);
    const statements: D1PreparedStatement[] = [];
    for (const [table, cols] of await this.tableColumns()) {
      if (cols.includes("workspace"))
        statements.push(db.prepare(`SELECT '${table}' AS _t, * FROM "${table}" WHERE workspace = ?1`).bind(name));
      // Expired keys are anyone's to sweep (the middleware's opportunistic sweep covers every principal).
      else if (cols.includes("principal"))
        statements.push(
          db.prepare(`SELECT '${table}' AS _t, * FROM "${table}" WHERE principal = ?1 AND expires_at > ?2`).bind(name, this.t),
        );
      else if (cols.includes("execution_id") && ids.length > 0) {
        statements.push(
          db
            .prepare(`SELECT '${table}' AS _t, * FROM "${table}" WHERE execution_id IN (SELECT value FROM json_each(?1))`)
            .bind(JSON.stringify(ids)),
        );
      }
    }
    const results = await db.batch(statements);
    return results
      .flatMap((r) => r.results.map((row) => JSON.stringify(row)))
      .sort()
      .join("\n");
  }

  /** Every row of every table on both shards (the volatile counters left out), per table. */
  private async dump(): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    for (const shard of [0, 1]) {
      const db = this.shardEnv(shard).DB;
      const tables = [...(await this.tableColumns()).keys()];
      const results = await db.batch(tables.map((t) => db.prepare(`SELECT * FROM "${t}"`)));
      tables.forEach((t, i) =>
        out.set(
          `${shard}:${t}`,
          results[i]!.results.map((row) => JSON.stringify(row)),
        ),
      );
    }
    return out;
  }

  private async checkErasure(ws: number, erased: string[], before: Map<string, string[]>): Promise<void> {
    const after = await this.dump();
    const notes = erased.map((id) => this.known.get(id)?.note).filter((n): n is string => n !== undefined);
    // Notes another execution still holds (a duplicate payload started anew) may remain.
    const kept = new Set([...this.known].filter(([id, k]) => !erased.includes(id) && !k.erased).map(([, k]) => k.note));
    const marks = [...erased, ...notes.filter((n) => !kept.has(n))];
    for (const [table, rows] of after) {
      // What docs/history.md says an erasure keeps: the tombstone, the identity row until its window
      // ends (a duplicate inside it is still one) and the key sends (the retention guard) — ids and
      // hashes, never the payload's data.
      const keepsIds = KEPT_BY_ERASURE.has(table.slice(2));
      for (const raw of rows) {
        // An identity's hash (a lineage's name) is not an execution's data (before ids came from the window, an id was that hash).
        const row = raw.replace(/"(identity|lineage_id)":"[0-9a-f]{64}"/g, "");
        const mark = (keepsIds ? marks.filter((m) => !erased.includes(m)) : marks).find((m) => row.includes(m));
        if (mark)
          throw new Violation(
            "after an erasure nothing of the erased executions remains in D1",
            `${table} still holds ${mark}: ${row.slice(0, 300)}`,
          );
      }
    }
    const archive = (env as unknown as { ARCHIVE?: R2Bucket }).ARCHIVE;
    if (archive) {
      let cursor: string | undefined;
      do {
        const listed = await archive.list({ cursor, prefix: `` });
        for (const object of listed.objects) {
          if (erased.some((id) => object.key.includes(id))) throw new Violation("after an erasure nothing remains in R2", object.key);
        }
        cursor = listed.truncated ? listed.cursor : undefined;
      } while (cursor);
    }
    // Nothing else changed: every row that went or came names an erased execution, or is this
    // request's Idempotency-Key record, or an event an erased execution took.
    const wsName = this.names[ws]!;
    for (const [table, rowsAfter] of after) {
      const rowsBefore = before.get(table) ?? [];
      const a = new Set(rowsAfter);
      const b = new Set(rowsBefore);
      const changed = [...rowsBefore.filter((r) => !a.has(r)), ...rowsAfter.filter((r) => !b.has(r))];
      for (const row of changed) {
        if (erased.some((id) => row.includes(id)) || notes.some((n) => row.includes(n))) continue;
        if (table.endsWith(":idempotency_keys") && row.includes(`"principal":"${wsName}"`)) continue;
        // The request's middleware sweeps expired keys, any principal's (the destination's of long-past runs).
        if (table.endsWith(":idempotency_keys") && (JSON.parse(row) as { expires_at: number }).expires_at <= this.t) continue;
        // An event an erased execution took: blanked or removed with its taker (docs/events.md).
        if (table.endsWith(":events") && row.includes(`"workspace":"${wsName}"`)) continue;
        throw new Violation("an erasure changes nothing but the erased executions", `${table}: ${row.slice(0, 300)}`);
      }
    }
  }
}

/** Wall time per operation kind (MODEL_VERBOSE prints it). */
export const OP_TIMES: Record<string, { n: number; apply: number; check: number }> = {};

/** Runs `ops` on a fresh world; returns the violation (with the index of the operation) or null. */
export async function runOps(ops: readonly Op[]): Promise<{ at: number; violation: Violation } | null> {
  const world = new World();
  await world.setup();
  for (let i = 0; i < ops.length; i++) {
    try {
      const t0 = Date.now();
      await world.apply(ops[i]!);
      const t1 = Date.now();
      await world.check();
      const slot = (OP_TIMES[ops[i]!.t] ??= { n: 0, apply: 0, check: 0 });
      slot.n++;
      slot.apply += t1 - t0;
      slot.check += Date.now() - t1;
    } catch (error) {
      if (error instanceof Violation) return { at: i, violation: error };
      throw error;
    }
  }
  return null;
}

export { ADVANCES_MS };
