/**
 * The model learns compensation (SPEC section 18, docs/steps.md "Compensation"): a workflow
 * `compOrder` — `charge` (refunded) then `reserve` (released), and beside them `ship`, whose URL the
 * payload names: `labels` ships, `refused` answers 404 (the step fails for good). Triggered for a few
 * orders among everything else the model does (drops, faults, cron, advances), with operations of
 * its own: a crash of an undo worker after its call (its lease is lost; the reaper heals it), an undo
 * message delivered again, a lost refund response (the refund made, a 500 answered), an operator
 * retry of a FAILED step — alone or racing the deliveries that decide compensation —, a cancel with
 * or without `compensate` (alone or racing), and a start over of an order's execution (the burnt keys).
 *
 * The invariants, after every operation (the run's `compOrder` executions):
 * - **no undo for a step that did not complete**: every undo row undoes a COMPLETED step that declares
 *   `compensate`, and no step has two;
 * - **no undo before every step settled**: an execution with undo rows has no step DISPATCHED or
 *   EXECUTING, and an undo row is never older than the step it undoes;
 * - **every completed compensable step undone exactly once**: a COMPENSATING, COMPENSATED or
 *   COMPENSATION_FAILED execution has one undo row per COMPLETED compensable step; a COMPENSATED one
 *   has every undo COMPLETED, each with exactly one effect of its key at the destination; a FAILED
 *   one has no COMPLETED compensable step left standing;
 * - **the status never goes back**: once COMPENSATING, only COMPENSATING, COMPENSATED or
 *   COMPENSATION_FAILED; COMPENSATED (as COMPLETED and CANCELLED) is final;
 * - **burnt keys are never sent again**: no request carries a key of `burnt_keys` after it was
 *   burnt (timed, and counted from its first sighting);
 * - an operator retry or a cancel of a compensating or compensated execution answers 409 (never 2xx).
 *
 * The operations come from a stream of their own (seed ^ `COMP_SALT`) and are inserted among the
 * others: the existing seeds keep every operation and operand they had.
 */
import { createExecutionContext, createMessageBatch, getQueueResult, waitOnExecutionContext } from "cloudflare:test";
import { handleStepBatch } from "../../src/steps/consumer";
import { reap } from "../../src/steps/reaper";
import { defaultRuntime } from "../../src/steps/runtime";
import type { Op } from "./ops";
import { prng } from "./ops";
import { Violation, type World } from "./world";

export type CompOp =
  /** A trigger of `compOrder` for order `order` of workspace `ws`; `fail`: its shipping is refused (404: fails for good). */
  | { t: "compSend"; ws: number; order: number; fail: boolean }
  /** The next refund is made by the destination, but answered 500 (the undo's retry must replay it). */
  | { t: "compFault" }
  /** The first due undo message goes to a worker that dies after its call, before its settle (its lease is lost). */
  | { t: "compCrash" }
  /** An undo message (of the `pick`-th undo row of the run) delivered again, now. */
  | { t: "compRedeliver"; pick: number }
  /** Operator retry of the `pick`-th FAILED step of a `compOrder` execution; `race`: while the due messages are delivered. */
  | { t: "compRetry"; ws: number; pick: number; race: boolean }
  /** Cancel of the `pick`-th `compOrder` execution, `compensate` or not; `race`: while the due messages are delivered. */
  | { t: "compCancel"; ws: number; pick: number; compensate: boolean; race: boolean }
  /** Start over of the `pick`-th `compOrder` execution (its charge key may be burnt). */
  | { t: "compStartOver"; ws: number; pick: number };

export const COMP_WORKFLOW = "compOrder";
const COMP_SALT = 0x2c0a7e11;
const COMPENSATION = new Set(["COMPENSATING", "COMPENSATED", "COMPENSATION_FAILED"]);
const RETRY = { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000 };

const gateway = (dest: string, id: string, url: string, keyPrefix: string, undoPrefix: string | null) => ({
  id,
  type: "GATEWAY",
  config: {
    method: "POST",
    url,
    headers: { "Idempotency-Key": `= '${keyPrefix}-' & payload.order.id` },
    body: "= { 'order': payload.order.id }",
    retry: RETRY,
    ...(undoPrefix
      ? {
          compensate: {
            method: "POST",
            url: `${dest}/payments/refunds`,
            headers: { "Idempotency-Key": `= '${undoPrefix}-' & payload.order.id` },
            body: "= { 'order': payload.order.id, 'charge': output.body.id }",
            retry: RETRY,
          },
        }
      : {}),
  },
});

export function compWorkflow(dest: string): unknown {
  return {
    id: COMP_WORKFLOW,
    history: { completed: "2m", failed: "2m", cancelled: "2m" },
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", dedupeWindow: "1m" } },
      gateway(dest, "charge", `${dest}/payments/charges`, "ccharge", "crefund"),
      gateway(dest, "reserve", `${dest}/payments/charges`, "creserve", "crelease"),
      gateway(dest, "ship", `= '${dest}/shipping/' & payload.order.ship`, "cship", null),
    ],
    edges: [
      { from: "entry", to: "charge" },
      { from: "charge", to: "reserve" },
      // Beside the charge: shipping may fail while the charge is still in flight (the decision must wait).
      { from: "entry", to: "ship" },
    ],
  };
}

/** Saves `compOrder` in workspace `ws` (the world's setup). */
export async function setupComp(world: World, ws: number, dest: string): Promise<void> {
  const res = await world.call(ws, "PUT", `/v1/workflows/${COMP_WORKFLOW}`, compWorkflow(dest));
  if (res.status >= 300) throw new Error(`saving ${COMP_WORKFLOW}: ${res.status} ${await res.text()}`);
}

/** The compensation operations inserted into `ops` (about one in six), from their own stream. */
export function withCompOps(seed: number, ops: Op[], workspaces: number): Op[] {
  const r = prng(seed ^ COMP_SALT);
  const int = (n: number) => Math.floor(r() * n);
  const out: Op[] = [];
  for (const op of ops) {
    const x = r();
    if (op.t !== "settle") {
      if (x < 0.09) out.push({ t: "compSend", ws: int(workspaces), order: int(3), fail: r() < 0.7 });
      else if (x < 0.105) out.push({ t: "compFault" });
      else if (x < 0.12) out.push({ t: "compCrash" });
      else if (x < 0.135) out.push({ t: "compRedeliver", pick: int(8) });
      else if (x < 0.15) out.push({ t: "compRetry", ws: int(workspaces), pick: int(8), race: r() < 0.5 });
      else if (x < 0.165) out.push({ t: "compCancel", ws: int(workspaces), pick: int(8), compensate: r() < 0.7, race: r() < 0.5 });
      else if (x < 0.175) out.push({ t: "compStartOver", ws: int(workspaces), pick: int(8) });
    }
    out.push(op);
  }
  return out;
}

/** What the model remembers of a world's compensations between checks. */
interface CompState {
  /** The last status seen per execution. */
  statuses: Map<string, string>;
  /** Requests seen per burnt key at its first sighting. */
  burntSeen: Map<string, number>;
}
const states = new WeakMap<World, CompState>();
const stateOf = (world: World): CompState => {
  let s = states.get(world);
  if (!s) states.set(world, (s = { statuses: new Map(), burntSeen: new Map() }));
  return s;
};

async function executions(world: World, ws: number): Promise<Array<{ id: string; status: string }>> {
  const { results } = await world
    .dbOf(ws)
    .prepare(`SELECT id, status FROM executions WHERE workspace = ?1 AND workflow_id = ?2 ORDER BY created_at, id`)
    .bind(world.names[ws], COMP_WORKFLOW)
    .all<{ id: string; status: string }>();
  return results;
}

export async function applyCompOp(world: World, op: CompOp): Promise<void> {
  switch (op.t) {
    case "compSend": {
      // The order is the workspace's own: keys (and the invariants) are per workspace's orders.
      const order = { id: `${world.order(op.order)}-c${op.ws}`, total: 10, ship: op.fail ? "refused" : "labels" };
      // The trigger route reaps its shard after answering (src/ingress/heal.ts): reap first, so what it
      // may re-send is only what this trigger did (another workspace's undo re-sent would change its rows).
      await reapShard(world, op.ws);
      const res = await world.scoped(op.ws, () =>
        world.call(op.ws, "POST", `/v1/workflows/${COMP_WORKFLOW}/trigger`, { order, note: `comp-${world.run}` }),
      );
      if (res.status >= 500) throw new Violation("no 5xx", `compOrder trigger answered ${res.status}: ${await res.text()}`);
      return;
    }
    case "compFault":
      world.dest.fault("/payments/refunds", 500);
      return;
    case "compCrash":
      return crashUndo(world);
    case "compRedeliver":
      return redeliver(world, op.pick);
    case "compRetry":
      return retry(world, op);
    case "compCancel":
      return cancel(world, op);
    case "compStartOver": {
      const list = await executions(world, op.ws);
      const from = list[op.pick % Math.max(1, list.length)];
      if (!from) return;
      await reapShard(world, op.ws);
      const res = await world.scoped(op.ws, () => world.call(op.ws, "POST", `/v1/executions/${from.id}/start-over`, undefined, true));
      if (res.status >= 500) throw new Violation("no 5xx", `start-over answered ${res.status}: ${await res.text()}`);
      return;
    }
  }
}

async function reapShard(world: World, ws: number): Promise<void> {
  await reap(defaultRuntime(world.shardEnv(world.shardOf(ws)), { reapEveryMs: null }));
}

const isUndoMessage = (body: unknown): body is { executionId: string; vertexId: string; undo: number; shard?: number } =>
  typeof body === "object" && body !== null && typeof (body as { undo?: unknown }).undo === "number";

/** The first due undo message, run by a worker that dies after its call (before its settle). */
async function crashUndo(world: World): Promise<void> {
  const i = world.pending.findIndex((p) => p.dueAt <= world.t && isUndoMessage(p.body));
  if (i < 0) return;
  const [p] = world.pending.splice(i, 1);
  const body = p!.body as { shard?: number };
  const se = world.shardEnv(body.shard ?? 0);
  const batch = createMessageBatch<unknown>("idemflow-steps", [{ id: "c0", timestamp: new Date(world.t), attempts: p!.attempts, body }]);
  const ctx = createExecutionContext();
  const died = () => {
    throw new Error("model: the undo worker died after its call");
  };
  await handleStepBatch(batch, se, ctx, defaultRuntime(se, { afterRun: died, reapEveryMs: null }));
  await waitOnExecutionContext(ctx);
  const result = await getQueueResult(batch, ctx);
  for (const retry of result.retryMessages)
    world.pending.push({ body, dueAt: world.t + (retry.delaySeconds ?? 0) * 1000, attempts: p!.attempts + 1 });
}

/** A copy of an undo's message, due now: of the `pick`-th undo row of the run's workspaces (any state). */
async function redeliver(world: World, pick: number): Promise<void> {
  const rows: Array<{ body: unknown }> = [];
  for (const shard of [0, 1]) {
    const names = world.names.filter((_, ws) => world.shardOf(ws) === shard);
    if (names.length === 0) continue;
    const { results } = await world
      .shardEnv(shard)
      .DB.prepare(
        `SELECT execution_id AS executionId, vertex_id AS vertexId, item_index AS place FROM work_items
         WHERE kind = 'undo' AND workspace IN (SELECT value FROM json_each(?1)) ORDER BY execution_id, item_index`,
      )
      .bind(JSON.stringify(names))
      .all<{ executionId: string; vertexId: string; place: number }>();
    for (const u of results) rows.push({ body: { executionId: u.executionId, vertexId: u.vertexId, undo: u.place, shard } });
  }
  const row = rows[pick % Math.max(1, rows.length)];
  if (row) world.pending.push({ body: row.body, dueAt: world.t, attempts: 1 });
}

/** Delivers every due message while `action` runs (a race), or runs it alone. */
async function racing<T>(world: World, race: boolean, action: () => Promise<T>): Promise<T> {
  if (!race) return action();
  const [result] = await Promise.all([action(), world.deliver(Infinity)]);
  return result;
}

async function retry(world: World, op: Extract<CompOp, { t: "compRetry" }>): Promise<void> {
  const { results } = await world
    .dbOf(op.ws)
    .prepare(
      `SELECT s.execution_id, s.vertex_id, e.status FROM steps s JOIN executions e ON e.id = s.execution_id
       WHERE s.workspace = ?1 AND e.workflow_id = ?2 AND s.state = 'FAILED' ORDER BY s.execution_id, s.vertex_id`,
    )
    .bind(world.names[op.ws], COMP_WORKFLOW)
    .all<{ execution_id: string; vertex_id: string; status: string }>();
  const step = results[op.pick % Math.max(1, results.length)];
  if (!step) return;
  const res = await racing(world, op.race, () =>
    world.call(op.ws, "POST", `/v1/executions/${step.execution_id}/steps/${step.vertex_id}/retry`, {}, true),
  );
  if (res.status >= 500) throw new Violation("no 5xx", `retry answered ${res.status}: ${await res.text()}`);
  // Alone, the status read before is the one the retry meets: a compensation's answers 409.
  if (!op.race && COMPENSATION.has(step.status) && res.status !== 409) {
    throw new Violation(
      "an operator retry of a compensating or compensated execution answers 409",
      `${step.execution_id} ${step.status}: retry of ${step.vertex_id} answered ${res.status} ${await res.text()}`,
    );
  }
}

async function cancel(world: World, op: Extract<CompOp, { t: "compCancel" }>): Promise<void> {
  const list = await executions(world, op.ws);
  const target = list[op.pick % Math.max(1, list.length)];
  if (!target) return;
  const res = await racing(world, op.race, () =>
    world.call(op.ws, "POST", `/v1/executions/${target.id}/cancel`, { compensate: op.compensate }, true),
  );
  if (res.status >= 500) throw new Violation("no 5xx", `cancel answered ${res.status}: ${await res.text()}`);
  if (!op.race && COMPENSATION.has(target.status) && res.status < 300) {
    throw new Violation(
      "a cancel of a compensating or compensated execution is refused",
      `${target.id} ${target.status}: cancel answered ${res.status} ${await res.text()}`,
    );
  }
}

interface StepRow {
  execution_id: string;
  status: string;
  vertex_id: string;
  state: string;
  finished_at: number | null;
}

interface UndoRow {
  execution_id: string;
  vertex_id: string;
  row_key: string;
  state: string;
  idempotency_key: string | null;
  created_at: number;
}

/** Transitions of an execution's status allowed between two checks (several may happen in one operation). */
function allowed(before: string, now: string): boolean {
  if (before === now) return true;
  if (before === "COMPENSATING" || before === "COMPENSATION_FAILED") return COMPENSATION.has(now);
  if (before === "COMPENSATED" || before === "COMPLETED" || before === "CANCELLED") return false;
  return true; // RUNNING and FAILED (an operator retry reopens a FAILED one) may go anywhere
}

export async function checkComp(world: World, shard: number): Promise<void> {
  const names = world.names.filter((_, ws) => world.shardOf(ws) === shard);
  if (names.length === 0) return;
  const db = world.shardEnv(shard).DB;
  const inRun = JSON.stringify(names);
  const [stepsResult, undosResult, burntResult] = await db.batch([
    db
      .prepare(
        `SELECT s.execution_id, e.status, s.vertex_id, s.state, s.finished_at FROM steps s JOIN executions e ON e.id = s.execution_id
         WHERE e.workspace IN (SELECT value FROM json_each(?1)) AND e.workflow_id = ?2`,
      )
      .bind(inRun, COMP_WORKFLOW),
    db
      .prepare(
        `SELECT w.execution_id, w.vertex_id, w.row_key, w.state, w.idempotency_key, w.created_at FROM work_items w
         WHERE w.kind = 'undo' AND w.workspace IN (SELECT value FROM json_each(?1))`,
      )
      .bind(inRun),
    db.prepare(`SELECT idempotency_key AS key, burnt_at FROM burnt_keys WHERE workspace IN (SELECT value FROM json_each(?1))`).bind(inRun),
  ]);
  const steps = stepsResult!.results as unknown as StepRow[];
  const undos = undosResult!.results as unknown as UndoRow[];
  const burnt = burntResult!.results as unknown as Array<{ key: string; burnt_at: number }>;

  const byExecution = new Map<string, { status: string; steps: Map<string, StepRow>; undos: UndoRow[] }>();
  for (const s of steps) {
    const e = byExecution.get(s.execution_id) ?? { status: s.status, steps: new Map(), undos: [] };
    e.steps.set(s.vertex_id, s);
    byExecution.set(s.execution_id, e);
  }
  for (const u of undos) byExecution.get(u.execution_id)?.undos.push(u);

  const effects = new Map<string, number>();
  for (const e of world.dest.effects) if (e.key) effects.set(e.key, (effects.get(e.key) ?? 0) + 1);
  const compensable = new Set(["charge", "reserve"]);
  const state = stateOf(world);

  for (const [id, e] of byExecution) {
    // The status never goes back.
    const before = state.statuses.get(id);
    if (before !== undefined && !allowed(before, e.status)) {
      throw new Violation("an execution's compensation status never goes back", `${id}: ${before} → ${e.status}`);
    }
    state.statuses.set(id, e.status);

    const seen = new Set<string>();
    for (const u of e.undos) {
      const step = e.steps.get(u.vertex_id);
      if (!step || step.state !== "COMPLETED" || !compensable.has(u.vertex_id)) {
        throw new Violation(
          "no undo for a step that did not complete",
          `${id}: undo ${u.row_key} (${u.state}) of step ${u.vertex_id} ${step?.state ?? "missing"}`,
        );
      }
      if (seen.has(u.vertex_id)) throw new Violation("a step is undone at most once", `${id}: two undo rows of ${u.vertex_id}`);
      seen.add(u.vertex_id);
      if (step.finished_at === null || u.created_at < step.finished_at) {
        throw new Violation(
          "no undo before its step settled",
          `${id}: undo ${u.row_key} created ${u.created_at}, step finished ${step.finished_at}`,
        );
      }
    }
    if (e.undos.length > 0) {
      const inFlight = [...e.steps.values()].filter((s) => s.state === "DISPATCHED" || s.state === "EXECUTING");
      if (inFlight.length > 0) {
        throw new Violation(
          "no undo before every step settled",
          `${id} (${e.status}): undo rows ${e.undos.map((u) => `${u.row_key}:${u.state}`).join(",")} beside ${inFlight
            .map((s) => `${s.vertex_id}:${s.state}`)
            .join(",")}`,
        );
      }
    }
    const completedCompensable = [...e.steps.values()].filter((s) => s.state === "COMPLETED" && compensable.has(s.vertex_id));
    if (COMPENSATION.has(e.status)) {
      const missing = completedCompensable.filter((s) => !seen.has(s.vertex_id));
      if (missing.length > 0) {
        throw new Violation(
          "every completed compensable step is undone",
          `${id} ${e.status}: no undo of ${missing.map((s) => s.vertex_id).join(",")}`,
        );
      }
    }
    if (e.status === "COMPENSATED") {
      for (const u of e.undos) {
        const n = u.idempotency_key ? (effects.get(u.idempotency_key) ?? 0) : 0;
        if (u.state !== "COMPLETED" || n !== 1) {
          throw new Violation(
            "every completed compensable step undone exactly once",
            `${id} COMPENSATED: undo ${u.row_key} ${u.state}, key ${u.idempotency_key}: ${n} effect(s) at the destination`,
          );
        }
      }
    }
    if (e.status === "FAILED" && completedCompensable.length > 0) {
      throw new Violation(
        "a failed execution leaves no completed compensable step standing",
        `${id} FAILED with ${completedCompensable.map((s) => s.vertex_id).join(",")} COMPLETED`,
      );
    }
  }

  // Burnt keys (this workflow's) are never sent again.
  const requests = new Map<string, Array<{ at: number }>>();
  for (const r of world.dest.requests) {
    const key = r.headers["idempotency-key"];
    if (!key) continue;
    const list = requests.get(key) ?? [];
    list.push(r);
    requests.set(key, list);
  }
  for (const b of burnt) {
    if (!b.key.startsWith("ccharge-") && !b.key.startsWith("creserve-")) continue;
    const sent = requests.get(b.key) ?? [];
    const late = sent.filter((r) => r.at > b.burnt_at);
    const first = state.burntSeen.get(b.key);
    if (first === undefined) state.burntSeen.set(b.key, sent.length);
    if (late.length > 0 || (first !== undefined && sent.length > first)) {
      throw new Violation(
        "a burnt key is never sent again",
        `${b.key} burnt at ${b.burnt_at}: ${late.length} request(s) after, ${sent.length} in all (${first ?? sent.length} when first seen)`,
      );
    }
  }
}
