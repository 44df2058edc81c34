/**
 * One scenario's world: the real engine — the real app (`app.fetch`: trigger, events, operator
 * routes, the trace), the real queue handler and the real cron — on local D1, driven on a virtual
 * clock through the clock seam (src/lib/clock.ts), with every outbound call a step makes answered
 * from the scenario through the outbound seam (src/lib/outbound-fetch.ts). Nothing is sent to the
 * network: a call the scenario did not script stops the run ("unscripted call to <step> attempt <n>").
 *
 * Each scenario has a workspace of its own (the workflow, its connectors and fake secrets saved
 * there through the routes) and starts later in virtual time than every scenario before it in
 * the file. The queue is held here: each message is delivered alone, in due order, so every call
 * is the step of the message being delivered (chaining is off, as in the rest of the suite).
 */
import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  env,
  getQueueResult,
  waitOnExecutionContext,
} from "cloudflare:test";
import { app } from "../../src/app";
import { destinationKeyOf } from "../../src/definitions/destination-key";
import type { GatewayVertex, WorkflowDefinition } from "../../src/definitions/schema";
import { withClock } from "../../src/lib/clock";
import { pointerTokens } from "../../src/lib/json-pointer";
import { withOutboundFetch } from "../../src/lib/outbound-fetch";
import { handleQueueBatch } from "../../src/queue";
import { undoVertex } from "../../src/steps/compensate";
import { runScheduled } from "../../src/scheduled";
import { deliveredEnv } from "../helpers/shards";
import type { Answer } from "./scenario-schema";

/** One send (or verify probe) of a step that reached the mocked destination. */
export interface Send {
  step: string;
  execution: string;
  /** A step's send, its verify probe, or its undo call (a compensation's, docs/steps.md "Compensation"). */
  kind: "send" | "probe" | "undo";
  /** A MAP's item index (the message's `item`), or null for a plain step. */
  item: number | null;
  /** 1-based, per step and kind, over the scenario's executions: the scenario's answer number. */
  n: number;
  at: number;
  method: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
  /** The destination key the request carried (header or body field, as the step declares it), or null. */
  key: string | null;
  /** What it was answered: `201`, `lost`, `timeout`, `409 in progress`, or `unscripted`. */
  answer: string;
}

export interface Scripted {
  answers: Answer[];
  probes: Answer[];
  /** The answers to the step's undo calls. */
  compensate: Answer[];
}

interface Pending {
  body: unknown;
  dueAt: number;
  attempts: number;
}

const MINUTE = 60_000;
const HOUR = 3_600_000;
/** The queue's max_retries (wrangler.toml): past it a message goes to the dead-letter queue. */
const MAX_DELIVERIES = 10;
/** Deliveries and cron ticks one scenario may take before the runner calls it runaway. */
const MAX_ROUNDS = 2_000;

/** Virtual time only moves forward over a file: each scenario starts a day after the last one ended. */
let fileClock = Date.UTC(2030, 0, 1);
let worlds = 0;

export class RunnerError extends Error {}

export class ScenarioWorld {
  t: number;
  readonly t0: number;
  readonly workspace: string;
  readonly env: Env;
  readonly sends: Send[] = [];
  /** Executions of this scenario, oldest first (a start over, a schedule tick add one). */
  readonly executions: string[] = [];
  /** The first call the scenario did not script: the run stops there. */
  unscripted: string | null = null;
  /** What the runner could not do inside a call (the engine would take a throw there for a network error). */
  private broken: string | null = null;
  private pending: Pending[] = [];
  private current: { executionId: string; vertexId: string; item: number | null; undo: number | null } | null = null;
  private readonly counts = new Map<string, number>();
  private keys = 0;
  private readonly timers: Array<{ ms: number; id: ReturnType<typeof setTimeout>; fire: () => void }> = [];
  private readonly ours = new Map<string, boolean>();
  rounds = 0;

  constructor(
    readonly definition: WorkflowDefinition,
    private readonly scripts: Map<string, Scripted>,
  ) {
    this.t0 = this.t = fileClock;
    this.workspace = `scenario-${++worlds}-${crypto.randomUUID().slice(0, 8)}`;
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
      // One shard: the scenario's workspace is on shard 0, and the cron runs its tasks there only.
      D1_SHARDS: "DB",
      WORKSPACE_SHARDS: `${this.workspace}:0`,
      API_TOKENS: `${this.workspace}-token:${this.workspace}`,
      // Every destination is allowed: none is called.
      OUTBOUND_ALLOWLIST: "*",
    } as unknown as Env;
    this.env = withOutboundFetch(
      withClock(base, () => this.t),
      (input, init) => this.answer(input, init),
    );
  }

  /** The run is over: the next scenario starts a day after this one's last virtual moment. */
  close(): void {
    fileClock = Math.ceil((Math.max(fileClock, this.t) + 86_400_000) / 86_400_000) * 86_400_000;
  }

  private enqueue(body: unknown, delaySeconds: number | undefined): void {
    this.pending.push({ body, dueAt: this.t + (delaySeconds ?? 0) * 1000, attempts: 1 });
  }

  /** A request to the real app as this scenario's workspace. */
  async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
    const all: Record<string, string> = { ...headers, authorization: `Bearer ${this.workspace}-token` };
    if (body !== undefined) all["content-type"] ??= "application/json";
    // The operator routes require an Idempotency-Key; the trigger and events routes get none (their identity is the scenario's).
    if (/\/(cancel|retry|start-over)$/.test(path)) all["idempotency-key"] ??= `scenario-${this.workspace}-${++this.keys}`;
    const ctx = createExecutionContext();
    const response = await app.fetch(
      new Request(`http://idemflow.test${path}`, { method, headers: all, body: body === undefined ? undefined : JSON.stringify(body) }),
      this.env,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    return response;
  }

  /** A route answer the runner needs to succeed; anything else stops the run with the route's problem. */
  async must(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<unknown> {
    const response = await this.call(method, path, body, headers);
    const text = await response.text();
    if (response.status >= 300) throw new RunnerError(`${method} ${path} answered ${response.status}: ${text.slice(0, 600)}`);
    return text.length === 0 ? null : (JSON.parse(text) as unknown);
  }

  adopt(executionId: string): void {
    if (!this.executions.includes(executionId)) this.executions.push(executionId);
    this.ours.set(executionId, true);
  }

  newest(): string | undefined {
    return this.executions[this.executions.length - 1];
  }

  // ------------------------------------------------------------------ time

  /**
   * Runs the engine up to `limit` (virtual): the due messages one at a time in due order, then the
   * next thing that would happen — a delayed message, or a parked step's, a retry's or a lease's time,
   * reached by the real cron on the minute (as production's every-minute tick) — until nothing
   * is left before `limit`. The clock stays where the last thing happened.
   */
  async runUntil(limit: number): Promise<void> {
    while (this.unscripted === null) {
      if (this.broken !== null) throw new RunnerError(this.broken);
      if (++this.rounds > MAX_ROUNDS) throw new RunnerError(`the run did not settle within ${MAX_ROUNDS} deliveries and cron ticks`);
      const due = this.nextDue();
      if (due !== undefined && due.dueAt <= this.t) {
        await this.deliver(due);
        continue;
      }
      // The cron's first minute at or after the next time a step can move (the wake-up task, the reaper)…
      const wake = await this.nextWake();
      const tick = Number.isFinite(wake)
        ? Math.max(Math.ceil(wake / MINUTE) * MINUTE, Math.floor(this.t / MINUTE) * MINUTE + MINUTE)
        : Infinity;
      // …unless a message comes first (a retry's, a short sleep's): then that message.
      if (due !== undefined && due.dueAt <= tick) {
        if (due.dueAt > limit) return;
        this.t = due.dueAt;
        continue;
      }
      if (tick > limit) return;
      this.t = tick;
      await this.cron();
    }
  }

  /**
   * Moves the clock to `at` (never back). Every moment a step of the scenario can move before it was
   * reached by `runUntil`; a jump of an hour or more also gets one cron tick at `at`, for the
   * housekeeping production would have run on the way (sweeps of windows, keys, history).
   */
  async advanceTo(at: number): Promise<void> {
    if (at <= this.t) return;
    const ticked = at - this.t >= HOUR;
    this.t = at;
    if (ticked) await this.cron();
  }

  private nextDue(): Pending | undefined {
    let best: Pending | undefined;
    for (const p of this.pending) if (!best || p.dueAt < best.dueAt) best = p;
    return best;
  }

  /** The earliest time one of the scenario's unfinished steps can move: a retry's, a parked step's, a lease's. */
  private async nextWake(): Promise<number> {
    if (this.executions.length === 0) return Infinity;
    const row = await env.DB.prepare(
      `SELECT MIN(CASE WHEN state = 'DISPATCHED' THEN available_at ELSE COALESCE(parked_until, lease_until) END) AS at
       FROM steps WHERE execution_id IN (SELECT value FROM json_each(?1)) AND state IN ('DISPATCHED', 'EXECUTING')`,
    )
      .bind(JSON.stringify(this.executions))
      .first<{ at: number | null }>();
    return row?.at ?? Infinity;
  }

  /** A cron tick at the current virtual time: every periodic task, as production's every-minute trigger. */
  async cron(cron = "* * * * *"): Promise<void> {
    const ctx = createExecutionContext();
    await runScheduled(createScheduledController({ cron, scheduledTime: this.t }), this.env, ctx);
    await waitOnExecutionContext(ctx);
  }

  /** Whether a queue message is this scenario's (the cron's tasks are shard-wide: others' are dropped). */
  private async isOurs(body: unknown): Promise<boolean> {
    const id = (body as { executionId?: unknown } | null)?.executionId;
    if (typeof id !== "string") return false;
    let ours = this.ours.get(id);
    if (ours === undefined) {
      const row = await env.DB.prepare("SELECT workspace FROM executions WHERE id = ?1").bind(id).first<{ workspace: string }>();
      ours = row?.workspace === this.workspace;
      this.ours.set(id, ours);
      if (ours) this.adopt(id);
    }
    return ours;
  }

  private async deliver(p: Pending): Promise<void> {
    this.pending.splice(this.pending.indexOf(p), 1);
    if (!(await this.isOurs(p.body))) return;
    const { executionId, vertexId, item, undo } = p.body as { executionId: string; vertexId: string; item?: number; undo?: number };
    const batch = createMessageBatch<unknown>("idemflow-steps", [
      { id: "m0", timestamp: new Date(this.t), attempts: p.attempts, body: p.body },
    ]);
    const ctx = createExecutionContext();
    this.current = { executionId, vertexId, item: item ?? null, undo: undo ?? null };
    const realSetTimeout = globalThis.setTimeout;
    // The send's own timer (src/steps/gateway/send.ts) is recorded, so a scripted `timeout` fires it at once.
    globalThis.setTimeout = ((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
      const id = realSetTimeout(fn, ms, ...args);
      this.timers.push({ ms: ms ?? 0, id, fire: () => fn(...args) });
      return id;
    }) as typeof setTimeout;
    try {
      await handleQueueBatch(batch, this.env, ctx);
      await waitOnExecutionContext(ctx);
    } finally {
      globalThis.setTimeout = realSetTimeout;
      this.current = null;
      this.timers.length = 0;
    }
    const result = await getQueueResult(batch, ctx);
    for (const retry of result.retryMessages) {
      if (p.attempts < MAX_DELIVERIES)
        this.pending.push({ body: p.body, dueAt: this.t + (retry.delaySeconds ?? 0) * 1000, attempts: p.attempts + 1 });
    }
  }

  // ------------------------------------------------------------------ the mocked destinations

  /** The Gateway a call of `vertexId` comes from: the step itself, or the Gateway step of a MAP. */
  private gateway(vertexId: string): GatewayVertex | undefined {
    return gatewayOf(this.definition, vertexId);
  }

  /** The outbound seam: the step being delivered is the caller; its next scripted answer is the answer. */
  private async answer(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    const request = new Request(input as RequestInfo, init);
    const current = this.current;
    const step = current?.vertexId ?? "(no step)";
    const own = current ? this.gateway(current.vertexId) : undefined;
    // An undo message (`undo`: its place) calls the step's `compensate`: its own method, URL and key.
    const undoing = current?.undo !== null && current?.undo !== undefined && own !== undefined;
    const vertex = undoing ? (undoVertex(own) ?? undefined) : own;
    const kind: Send["kind"] = undoing ? "undo" : vertex && isProbe(vertex, request) ? "probe" : "send";
    const counter = `${step}/${kind}`;
    const n = (this.counts.get(counter) ?? 0) + 1;
    this.counts.set(counter, n);
    const text = await request.text();
    let body: unknown = text;
    try {
      body = text.length === 0 ? null : (JSON.parse(text) as unknown);
    } catch {
      // not JSON: kept as text
    }
    const headers = Object.fromEntries(request.headers);
    const send: Send = {
      step,
      execution: current?.executionId ?? "",
      kind,
      item: current?.item ?? null,
      n,
      at: this.t,
      method: request.method,
      url: request.url,
      headers,
      body,
      key: vertex ? keyIn(vertex, headers, body) : null,
      answer: "unscripted",
    };
    this.sends.push(send);
    const script = current ? this.scripts.get(current.vertexId) : undefined;
    const scripted = (kind === "probe" ? script?.probes : kind === "undo" ? script?.compensate : script?.answers)?.[n - 1];
    if (!scripted) {
      const what = kind === "probe" ? "verify probe of" : kind === "undo" ? "undo call of" : "call to";
      this.unscripted ??= `unscripted ${what} ${step} ${kind === "probe" ? "probe" : "attempt"} ${n} (${request.method} ${request.url})`;
      throw new TypeError(`scenario: ${this.unscripted}`);
    }
    if (scripted.lose) {
      send.answer = "lost";
      throw new TypeError("scenario: the destination handled the call and its answer was lost");
    }
    if (scripted.timeout) {
      send.answer = "timeout";
      const ms = vertex?.config.timeoutMs ?? 0;
      const timer = [...this.timers].reverse().find((x) => x.ms === ms);
      if (!timer) {
        this.broken = `a scripted timeout for ${step}: the send's ${ms} ms timer was not found (src/steps/gateway/send.ts changed?)`;
        throw new TypeError(this.broken);
      }
      this.t += ms; // the call took the whole timeout, in virtual time
      clearTimeout(timer.id);
      timer.fire();
      throw init?.signal?.reason ?? new DOMException("The operation was aborted", "AbortError");
    }
    const extra: Record<string, string> = scripted.retryAfter === undefined ? {} : { "retry-after": String(scripted.retryAfter) };
    if (scripted.inProgress) {
      send.answer = "409 in progress";
      const problem = {
        type: "https://idemflow.dev/problems/idempotency-key-in-progress",
        code: "idempotency-key-in-progress",
        title: "A request with this key is still in progress",
        status: 409,
      };
      return new Response(JSON.stringify(problem), { status: 409, headers: { "content-type": "application/problem+json", ...extra } });
    }
    const status = scripted.status!;
    send.answer = String(status);
    const hasBody = scripted.body !== undefined && status !== 204 && status !== 304;
    return new Response(hasBody ? JSON.stringify(scripted.body) : null, {
      status,
      headers: { ...(hasBody ? { "content-type": "application/json" } : {}), ...extra, ...(scripted.headers ?? {}) },
    });
  }

  /** The scenario's sends of `step` (not its probes). */
  sendsOf(step: string, kind: Send["kind"] = "send"): Send[] {
    return this.sends.filter((s) => s.step === step && s.kind === kind);
  }
}

/** The Gateway vertex whose calls `vertexId` makes: a GATEWAY step, or a MAP's GATEWAY `step` (under the MAP's id). */
export function gatewayOf(definition: WorkflowDefinition, vertexId: string): GatewayVertex | undefined {
  const v = definition.vertices.find((x) => x.id === vertexId);
  if (v?.type === "GATEWAY") return v as GatewayVertex;
  const step = (v?.config as { step?: { type?: string; config?: unknown } } | undefined)?.step;
  if (v?.type === "MAP" && step?.type === "GATEWAY") return { id: v.id, type: "GATEWAY", config: step.config } as GatewayVertex;
  return undefined;
}

/** A verify probe: the step declares `verify` (always a GET) and this request is a GET where the write is not. */
function isProbe(vertex: GatewayVertex, request: Request): boolean {
  return vertex.config.verify !== undefined && request.method === "GET" && vertex.config.method !== "GET";
}

/** The destination key a request carried, where the step declares it travels. */
function keyIn(vertex: GatewayVertex, headers: Record<string, string>, body: unknown): string | null {
  const rule = destinationKeyOf(vertex.config);
  if (rule === null) return null;
  if ("header" in rule.location) return headers[rule.location.header.toLowerCase()] ?? null;
  let at: unknown = body;
  for (const token of pointerTokens(rule.location.bodyField)) {
    if (at === null || typeof at !== "object" || !Object.hasOwn(at, token)) return null;
    at = (at as Record<string, unknown>)[token];
  }
  return typeof at === "string" ? at : at === undefined ? null : JSON.stringify(at);
}
