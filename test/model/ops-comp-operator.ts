/**
 * The model learns the operator's side of compensation and the parked-step cancel (docs/steps.md
 * "Compensation", migrations/0034): a workflow `compPark` — `charge` (refunded by `prefund-<order>`),
 * beside it `ship`, whose URL the payload names (`refused` answers 404: the step fails for good), and
 * beside both `pause` (a DELAY of 1 h) then `after`. The destination may refuse a refund (a 422
 * answered before any effect: the undo fails for good, the execution COMPENSATION_FAILED).
 *
 * Operations (a stream of their own, seed ^ `PARK_SALT`, inserted among the others: existing seeds keep
 * every operation and operand they had):
 * - `parkSend`: a trigger of `compPark` for an order, its shipping refused or not, with 0–2 refusals
 *   of its refund queued at the destination;
 * - `parkRetry`: POST /v1/executions/{id}/compensation/retry, alone or racing the due deliveries;
 * - `parkResolve`: POST …/compensation/resolve with a note, alone or racing the deliveries;
 * - `parkDuel`: a resolve racing a retry of the same execution.
 * Undo messages of `compPark` executions are also re-delivered by ./ops-compensation.ts `compRedeliver`.
 *
 * Invariants, after every operation (the run's `compPark` executions):
 * - **an undo is sent with the same key every time**: every refund request for one charge carries one
 *   key, the undo row's persisted key, and a retry answered 202 leaves that key unchanged; a refund key
 *   is effective at most once at the destination;
 * - **a resolved execution sends nothing after the resolve**: it is COMPENSATED with the note given, none
 *   of its undo rows is PENDING, DISPATCHED or EXECUTING, the key of every step whose undo did not
 *   complete is in `burnt_keys`, and no request carries its undo's key or a key it burnt after the resolve;
 * - **no compensation waits on a parked step**: an execution with a FAILED step and a COMPLETED `charge`,
 *   no Gateway step DISPATCHED or EXECUTING, is never held RUNNING by `pause` DISPATCHED or EXECUTING,
 *   and a compensating or compensated execution has no `pause` waiting;
 * - **retry and resolve answer 409 unless COMPENSATION_FAILED** (alone, or racing deliveries, which never
 *   move a COMPENSATION_FAILED execution); on a COMPENSATION_FAILED one, alone: 202 and 200; a resolve
 *   racing a retry: exactly one wins, the other answers 409.
 */
import { reap } from "../../src/steps/reaper";
import { defaultRuntime } from "../../src/steps/runtime";
import type { Op } from "./ops";
import { prng } from "./ops";
import { Violation, type World } from "./world";

export type ParkOp =
  /** A trigger of `compPark` for order `order` of `ws`; `fail`: shipping refused (404); `refusals`: its refund refused (422) so often. */
  | { t: "parkSend"; ws: number; order: number; fail: boolean; refusals: number }
  /**
   * Operator retry of the failed undo of the `pick`-th `compPark` execution (COMPENSATION_FAILED ones
   * first); `race`: while the due messages are delivered.
   */
  | { t: "parkRetry"; ws: number; pick: number; race: boolean }
  /** Operator resolve of the `pick`-th `compPark` execution; `race`: while the due messages are delivered. */
  | { t: "parkResolve"; ws: number; pick: number; race: boolean }
  /** A resolve racing a retry of the `pick`-th `compPark` execution. */
  | { t: "parkDuel"; ws: number; pick: number };

export const PARK_WORKFLOW = "compPark";
const PARK_SALT = 0x7a4b0c45;
const COMPENSATION = new Set(["COMPENSATING", "COMPENSATED", "COMPENSATION_FAILED"]);
const FINAL = new Set(["COMPLETED", "FAILED", "CANCELLED", "COMPENSATED"]);
const GATEWAYS = new Set(["charge", "ship", "after"]);
const RETRY = { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000 };

const call = (id: string, url: string, key: string, compensate?: unknown) => ({
  id,
  type: "GATEWAY",
  config: {
    method: "POST",
    url,
    headers: { "Idempotency-Key": `= '${key}-' & payload.order.id` },
    body: "= { 'order': payload.order.id }",
    retry: RETRY,
    ...(compensate ? { compensate } : {}),
  },
});

export function parkWorkflow(dest: string): unknown {
  return {
    id: PARK_WORKFLOW,
    history: { completed: "2m", failed: "2m", cancelled: "2m" },
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", dedupeWindow: "1m" } },
      call("charge", `${dest}/payments/charges`, "pcharge", {
        method: "POST",
        url: `${dest}/payments/refunds`,
        headers: { "Idempotency-Key": "= 'prefund-' & payload.order.id" },
        body: "= { 'order': payload.order.id, 'charge': output.body.id }",
        retry: RETRY,
      }),
      call("ship", `= '${dest}/shipping/' & payload.order.ship`, "pship"),
      { id: "pause", type: "DELAY", config: { for: "1h" } },
      call("after", `${dest}/shipping/labels`, "pafter"),
    ],
    edges: [
      { from: "entry", to: "charge" },
      { from: "entry", to: "ship" },
      { from: "entry", to: "pause" },
      { from: "pause", to: "after" },
    ],
  };
}

/** Refusals queued per refund key, per world (the destination answers 422 before any effect). */
const refusals = new WeakMap<World, Map<string, number>>();
/** Per world: the notes resolves sent (by execution), and requests seen per key at a resolve's first check. */
const states = new WeakMap<World, { notes: Map<string, string>; seen: Map<string, number>; statuses: Map<string, string> }>();
const stateOf = (world: World) => {
  let s = states.get(world);
  if (!s) states.set(world, (s = { notes: new Map(), seen: new Map(), statuses: new Map() }));
  return s;
};

/** Saves `compPark` in `ws`; the first call wraps the world's destination with the refund refusals. */
export async function setupPark(world: World, ws: number, dest: string): Promise<void> {
  if (!refusals.has(world)) {
    const queued = new Map<string, number>();
    refusals.set(world, queued);
    const inner = world.dest.fetch;
    world.dest.fetch = async (input, init) => {
      const request = new Request(input as RequestInfo, init);
      const key = request.headers.get("idempotency-key") ?? "";
      const n = queued.get(key) ?? 0;
      if (n === 0) return inner(request);
      queued.set(key, n - 1);
      world.dest.requests.push({ url: request.url, headers: Object.fromEntries(request.headers), body: await request.text(), at: world.t });
      return new Response(JSON.stringify({ error: "refund refused (model)" }), {
        status: 422,
        headers: { "content-type": "application/json" },
      });
    };
  }
  const res = await world.call(ws, "PUT", `/v1/workflows/${PARK_WORKFLOW}`, parkWorkflow(dest));
  if (res.status >= 300) throw new Error(`saving ${PARK_WORKFLOW}: ${res.status} ${await res.text()}`);
}

/** The operator operations inserted into `ops` (about one in eight), from their own stream. */
export function withParkOps(seed: number, ops: Op[], workspaces: number): Op[] {
  const r = prng(seed ^ PARK_SALT);
  const int = (n: number) => Math.floor(r() * n);
  const out: Op[] = [];
  for (const op of ops) {
    const x = r();
    if (op.t !== "settle") {
      if (x < 0.06) out.push({ t: "parkSend", ws: int(workspaces), order: int(3), fail: r() < 0.75, refusals: int(3) });
      else if (x < 0.085) out.push({ t: "parkRetry", ws: int(workspaces), pick: int(8), race: r() < 0.5 });
      else if (x < 0.105) out.push({ t: "parkResolve", ws: int(workspaces), pick: int(8), race: r() < 0.5 });
      else if (x < 0.12) out.push({ t: "parkDuel", ws: int(workspaces), pick: int(8) });
    }
    out.push(op);
  }
  return out;
}

async function parkExecutions(world: World, ws: number): Promise<Array<{ id: string; status: string }>> {
  const { results } = await world
    .dbOf(ws)
    .prepare(`SELECT id, status FROM executions WHERE workspace = ?1 AND workflow_id = ?2 ORDER BY created_at, id`)
    .bind(world.names[ws], PARK_WORKFLOW)
    .all<{ id: string; status: string }>();
  return results;
}

/** The `pick`-th execution: among the COMPENSATION_FAILED ones when there are (and `pick` < 6), else among all. */
async function target(world: World, ws: number, pick: number): Promise<{ id: string; status: string } | undefined> {
  const all = await parkExecutions(world, ws);
  const failed = all.filter((e) => e.status === "COMPENSATION_FAILED");
  const list = failed.length > 0 && pick < 6 ? failed : all;
  return list[pick % Math.max(1, list.length)];
}

async function undoKeys(world: World, ws: number, id: string): Promise<string> {
  const { results } = await world
    .dbOf(ws)
    .prepare(`SELECT row_key, idempotency_key FROM work_items WHERE execution_id = ?1 AND kind = 'undo' ORDER BY row_key`)
    .bind(id)
    .all<{ row_key: string; idempotency_key: string | null }>();
  return results.map((r) => `${r.row_key}=${r.idempotency_key}`).join(",");
}

const racing = async <T>(world: World, race: boolean, action: () => Promise<T>): Promise<T> =>
  race ? (await Promise.all([action(), world.deliver(Infinity)]))[0] : action();

const retryCall = (world: World, ws: number, id: string) =>
  world.call(ws, "POST", `/v1/executions/${id}/compensation/retry`, undefined, true);
const resolveCall = (world: World, ws: number, id: string) => {
  const note = `settled by hand: model ${world.run} ${id}`;
  stateOf(world).notes.set(id, note);
  return world.call(ws, "POST", `/v1/executions/${id}/compensation/resolve`, { note, resolvedBy: "model operator" }, true);
};

async function expectStatus(res: Response, ok: (s: number) => boolean, invariant: string, what: string): Promise<void> {
  if (res.status >= 500) throw new Violation("no 5xx", `${what} answered ${res.status}: ${await res.text()}`);
  if (!ok(res.status)) throw new Violation(invariant, `${what} answered ${res.status}: ${await res.text()}`);
}

export async function applyParkOp(world: World, op: ParkOp): Promise<void> {
  if (op.t === "parkSend") {
    const order = { id: `${world.order(op.order)}-p${op.ws}`, total: 10, ship: op.fail ? "refused" : "labels" };
    const queued = refusals.get(world)!;
    if (op.refusals > 0) queued.set(`prefund-${order.id}`, (queued.get(`prefund-${order.id}`) ?? 0) + op.refusals);
    // The trigger route reaps its shard after answering: reap first, so what it re-sends is this trigger's.
    await reap(defaultRuntime(world.shardEnv(world.shardOf(op.ws)), { reapEveryMs: null }));
    const res = await world.scoped(op.ws, () =>
      world.call(op.ws, "POST", `/v1/workflows/${PARK_WORKFLOW}/trigger`, { order, note: `park-${world.run}` }),
    );
    if (res.status >= 500) throw new Violation("no 5xx", `compPark trigger answered ${res.status}: ${await res.text()}`);
    return;
  }
  const e = await target(world, op.ws, op.pick);
  if (!e) return;
  const failed = e.status === "COMPENSATION_FAILED";
  const settled = failed || FINAL.has(e.status); // deliveries never move these
  const what = `${op.t} of ${e.id} (${e.status})`;
  const rule = "retry and resolve answer 409 unless COMPENSATION_FAILED";
  if (op.t === "parkRetry") {
    const keysBefore = await undoKeys(world, op.ws, e.id);
    const res = await racing(world, op.race, () => retryCall(world, op.ws, e.id));
    if (settled) await expectStatus(res, (s) => (failed ? s === 202 : s === 409), rule, what);
    else await expectStatus(res, () => true, rule, what);
    if (res.status === 202) {
      const keysAfter = await undoKeys(world, op.ws, e.id);
      if (keysAfter !== keysBefore) {
        throw new Violation(
          "an undo is sent with the same key every time",
          `${e.id}: undo keys ${keysBefore} before the retry, ${keysAfter} after`,
        );
      }
    }
    return;
  }
  if (op.t === "parkResolve") {
    const res = await racing(world, op.race, () => resolveCall(world, op.ws, e.id));
    if (settled) await expectStatus(res, (s) => (failed ? s === 200 : s === 409), rule, what);
    else await expectStatus(res, () => true, rule, what);
    return;
  }
  // Which starts first alternates with `pick` (so either may win).
  let retried: Response;
  let resolved: Response;
  if (op.pick % 2 === 0) [retried, resolved] = await Promise.all([retryCall(world, op.ws, e.id), resolveCall(world, op.ws, e.id)]);
  else [resolved, retried] = await Promise.all([resolveCall(world, op.ws, e.id), retryCall(world, op.ws, e.id)]);
  for (const [res, name] of [
    [retried, "retry"],
    [resolved, "resolve"],
  ] as const) {
    if (res.status >= 500) throw new Violation("no 5xx", `${name} of ${e.id} answered ${res.status}: ${await res.text()}`);
  }
  const wins = (retried.status === 202 ? 1 : 0) + (resolved.status === 200 ? 1 : 0);
  const refused = (retried.status === 409 ? 1 : 0) + (resolved.status === 409 ? 1 : 0);
  if (failed ? wins !== 1 || refused !== 1 : wins !== 0) {
    throw new Violation(
      "a resolve racing a retry: one wins, the other answers 409",
      `${e.id} (${e.status}): retry ${retried.status} ${await retried.text()}, resolve ${resolved.status} ${await resolved.text()}`,
    );
  }
}

interface Row {
  execution_id: string;
  status: string;
  vertex_id: string;
  state: string;
  idempotency_key: string | null;
}

export async function checkPark(world: World, shard: number): Promise<void> {
  const names = world.names.filter((_, ws) => world.shardOf(ws) === shard);
  if (names.length === 0) return;
  const db = world.shardEnv(shard).DB;
  const inRun = JSON.stringify(names);
  const [stepsResult, undosResult, resolutionsResult, burntResult] = await db.batch([
    db
      .prepare(
        `SELECT s.execution_id, e.status, s.vertex_id, s.state, s.idempotency_key FROM steps s JOIN executions e ON e.id = s.execution_id
         WHERE e.workspace IN (SELECT value FROM json_each(?1)) AND e.workflow_id = ?2`,
      )
      .bind(inRun, PARK_WORKFLOW),
    db
      .prepare(
        `SELECT w.execution_id, e.status, w.vertex_id, w.state, w.idempotency_key
         FROM work_items w JOIN executions e ON e.id = w.execution_id
         WHERE w.kind = 'undo' AND e.workspace IN (SELECT value FROM json_each(?1)) AND e.workflow_id = ?2`,
      )
      .bind(inRun, PARK_WORKFLOW),
    db
      .prepare(
        `SELECT r.execution_id, r.note, r.resolved_at, e.status FROM compensation_resolutions r JOIN executions e ON e.id = r.execution_id
         WHERE e.workspace IN (SELECT value FROM json_each(?1)) AND e.workflow_id = ?2`,
      )
      .bind(inRun, PARK_WORKFLOW),
    db
      .prepare(`SELECT idempotency_key AS key, execution_id FROM burnt_keys WHERE workspace IN (SELECT value FROM json_each(?1))`)
      .bind(inRun),
  ]);
  const steps = stepsResult!.results as unknown as Row[];
  const undos = undosResult!.results as unknown as Row[];
  const resolutions = resolutionsResult!.results as unknown as Array<{
    execution_id: string;
    note: string;
    resolved_at: number;
    status: string;
  }>;
  const burnt = burntResult!.results as unknown as Array<{ key: string; execution_id: string }>;
  const state = stateOf(world);

  const byExecution = new Map<string, { status: string; steps: Map<string, Row>; undos: Row[] }>();
  for (const s of steps) {
    const e = byExecution.get(s.execution_id) ?? { status: s.status, steps: new Map(), undos: [] };
    e.steps.set(s.vertex_id, s);
    byExecution.set(s.execution_id, e);
  }
  for (const u of undos) byExecution.get(u.execution_id)?.undos.push(u);

  // Requests per key, and refund keys per charge.
  const requests = new Map<string, Array<{ at: number }>>();
  const refundKeys = new Map<string, Set<string>>();
  for (const r of world.dest.requests) {
    const key = r.headers["idempotency-key"];
    if (!key) continue;
    const list = requests.get(key) ?? [];
    list.push(r);
    requests.set(key, list);
    if (!key.startsWith("prefund-")) continue;
    const charge = String((JSON.parse(r.body || "null") as { charge?: unknown } | null)?.charge);
    const keys = refundKeys.get(charge) ?? new Set<string>();
    keys.add(key);
    refundKeys.set(charge, keys);
    if (keys.size > 1)
      throw new Violation("an undo is sent with the same key every time", `refunds of charge ${charge} sent with ${[...keys].join(", ")}`);
  }
  const effects = new Map<string, number>();
  for (const e of world.dest.effects) if (e.key?.startsWith("prefund-")) effects.set(e.key, (effects.get(e.key) ?? 0) + 1);
  for (const [key, n] of effects) if (n > 1) throw new Violation("an undo key is effective at most once", `${key}: ${n} refunds`);

  for (const [id, e] of byExecution) {
    const before = state.statuses.get(id);
    if (
      before !== undefined &&
      before !== e.status &&
      (before === "COMPENSATED" || (COMPENSATION.has(before) && !COMPENSATION.has(e.status)))
    ) {
      throw new Violation("an execution's compensation status never goes back", `${id}: ${before} → ${e.status}`);
    }
    state.statuses.set(id, e.status);
    // No compensation waits on a parked step.
    const pause = e.steps.get("pause");
    const parked = pause !== undefined && (pause.state === "DISPATCHED" || pause.state === "EXECUTING");
    if (parked && COMPENSATION.has(e.status)) {
      throw new Violation("no compensation waits on a parked step", `${id} ${e.status} with pause ${pause!.state}`);
    }
    const hasFailed = [...e.steps.values()].some((s) => s.state === "FAILED");
    const inCall = [...e.steps.values()].some((s) => GATEWAYS.has(s.vertex_id) && (s.state === "DISPATCHED" || s.state === "EXECUTING"));
    if (e.status === "RUNNING" && parked && hasFailed && e.steps.get("charge")?.state === "COMPLETED" && !inCall) {
      throw new Violation(
        "no compensation waits on a parked step",
        `${id} RUNNING: ${[...e.steps.values()].map((s) => `${s.vertex_id}:${s.state}`).join(",")} — ` +
          `every Gateway step settled, pause still ${pause!.state}`,
      );
    }
  }

  // A resolved execution sends nothing after the resolve; its undone keys are burnt.
  for (const r of resolutions) {
    const e = byExecution.get(r.execution_id);
    const note = state.notes.get(r.execution_id);
    if (r.status !== "COMPENSATED" || (note !== undefined && r.note !== note)) {
      throw new Violation(
        "a resolved execution is COMPENSATED with the note given",
        `${r.execution_id} ${r.status}, note ${JSON.stringify(r.note)}`,
      );
    }
    if (!e) continue;
    const live = e.undos.filter((u) => u.state === "PENDING" || u.state === "DISPATCHED" || u.state === "EXECUTING");
    if (live.length > 0) {
      throw new Violation(
        "a resolved execution sends nothing after the resolve",
        `${r.execution_id}: undo of ${live.map((u) => `${u.vertex_id}:${u.state}`).join(",")}`,
      );
    }
    const keys: string[] = [];
    for (const u of e.undos) {
      if (u.idempotency_key) keys.push(u.idempotency_key);
      if (u.state === "COMPLETED") continue;
      const undone = e.steps.get(u.vertex_id)?.idempotency_key;
      if (!undone) continue;
      keys.push(undone);
      if (!burnt.some((b) => b.key === undone)) {
        throw new Violation(
          "a resolved execution's undone keys are burnt",
          `${r.execution_id}: ${u.vertex_id}'s key ${undone} not in burnt_keys`,
        );
      }
    }
    for (const key of keys) {
      const sent = requests.get(key) ?? [];
      const slot = `${r.execution_id} ${key}`;
      const first = state.seen.get(slot);
      if (first === undefined) state.seen.set(slot, sent.length);
      const late = sent.filter((q) => q.at > r.resolved_at);
      if (late.length > 0 || (first !== undefined && sent.length > first)) {
        throw new Violation(
          "a resolved execution sends nothing after the resolve",
          `${r.execution_id} resolved at ${r.resolved_at}: ${key} sent ${late.length} time(s) after, ` +
            `${sent.length} in all (${first ?? sent.length} at the first check)`,
        );
      }
    }
  }
}
