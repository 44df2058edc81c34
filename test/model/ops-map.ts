/**
 * The model learns MAP (SPEC section 16, docs/steps.md "MAP"): a workflow refunding each line of an
 * order (`mapRefunds`: a MAP of 1–4 lines at concurrency 2, each line a Gateway call keyed by the
 * order and the SKU), triggered for a few orders while everything else the model does — crashes
 * after the side effect, dropped messages, faults, cancels, erasures, retries, cron — goes on.
 *
 * The invariants (besides the world's own: per destination key, at most one effect — an item's key
 * among them):
 * - **a COMPLETED MAP has every item settled**, and its output holds one value per item;
 * - **no item runs after its MAP settled**: no item DISPATCHED or EXECUTING once its MAP step is
 *   COMPLETED, FAILED, SKIPPED or CANCELLED;
 * - **a COMPLETED item was charged exactly once**: one effect at the destination with its key.
 *
 * The operations come from a stream of their own (seed ^ `MAP_SALT`) and are inserted among the
 * others: the existing seeds keep every operation and operand they had.
 */
import type { Op } from "./ops";
import { prng } from "./ops";
import { Violation, type World } from "./world";

/** A trigger of the MAP workflow for order `order` of workspace `ws`, with `lines` lines. */
export type MapOp = { t: "mapSend"; ws: number; order: number; lines: number };

export const MAP_WORKFLOW = "mapRefunds";
const MAP_SALT = 0x51a7e0c3;
const KEY_PREFIX = "mrefund";

export function mapWorkflow(dest: string): unknown {
  return {
    id: MAP_WORKFLOW,
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", dedupeWindow: "1m" } },
      {
        id: "refund",
        type: "MAP",
        config: {
          items: "= payload.order.lines",
          as: "line",
          concurrency: 2,
          maxItems: 10,
          step: {
            type: "GATEWAY",
            config: {
              method: "POST",
              url: `${dest}/payments/charges`,
              headers: { "Idempotency-Key": `= '${KEY_PREFIX}-' & payload.order.id & '-' & line.sku` },
              body: "= { 'order': payload.order.id, 'sku': line.sku }",
              retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000 },
            },
          },
        },
      },
    ],
    edges: [{ from: "entry", to: "refund" }],
  };
}

/** Saves the MAP workflow in workspace `ws` (the world's setup). */
export async function setupMap(world: World, ws: number, dest: string): Promise<void> {
  const res = await world.call(ws, "PUT", `/v1/workflows/${MAP_WORKFLOW}`, mapWorkflow(dest));
  if (res.status >= 300) throw new Error(`saving ${MAP_WORKFLOW}: ${res.status} ${await res.text()}`);
}

/** The MAP operations inserted into `ops` (about one in ten), from their own stream. */
export function withMapOps(seed: number, ops: Op[], workspaces: number): Op[] {
  const r = prng(seed ^ MAP_SALT);
  const out: Op[] = [];
  for (const op of ops) {
    if (op.t !== "settle" && r() < 0.1) {
      out.push({ t: "mapSend", ws: Math.floor(r() * workspaces), order: Math.floor(r() * 3), lines: 1 + Math.floor(r() * 4) });
    }
    out.push(op);
  }
  return out;
}

export async function applyMapOp(world: World, op: MapOp): Promise<void> {
  const lines = Array.from({ length: op.lines }, (_, i) => ({ sku: `K${i}` }));
  // The order is the workspace's own: keys (and the invariant) are per workspace's orders.
  const payload = { order: { id: `${world.order(op.order)}-m${op.ws}`, total: 10, lines }, customer: "c0", note: `map-${world.run}` };
  const res = await world.call(op.ws, "POST", `/v1/workflows/${MAP_WORKFLOW}/trigger`, payload);
  if (res.status >= 500) throw new Violation("no 5xx", `MAP trigger answered ${res.status}: ${await res.text()}`);
}

interface MapRow {
  execution_id: string;
  state: string;
  output: string | null;
  items: number;
  unsettled: number;
  running: number;
}

/** A COMPLETED MAP has every item settled; no item runs after its MAP settled; a COMPLETED item was charged once. */
export async function checkMap(world: World, shard: number): Promise<void> {
  const db = world.shardEnv(shard).DB;
  const { results } = await db
    .prepare(
      `SELECT s.execution_id, s.state, s.output,
              (SELECT count(*) FROM work_items w WHERE w.execution_id = s.execution_id AND w.vertex_id = s.vertex_id) AS items,
              (SELECT count(*) FROM work_items w WHERE w.execution_id = s.execution_id AND w.vertex_id = s.vertex_id
                 AND w.state IN ('PENDING', 'DISPATCHED', 'EXECUTING')) AS unsettled,
              (SELECT count(*) FROM work_items w WHERE w.execution_id = s.execution_id AND w.vertex_id = s.vertex_id
                 AND w.state IN ('DISPATCHED', 'EXECUTING')) AS running
       FROM steps s JOIN executions e ON e.id = s.execution_id
       WHERE e.workflow_id = ?1 AND s.vertex_id = 'refund' AND e.workspace LIKE ?2`,
    )
    .bind(MAP_WORKFLOW, `${world.tag}-%`)
    .all<MapRow>();
  for (const m of results) {
    if (m.state === "COMPLETED") {
      if (m.unsettled > 0) {
        throw new Violation("a COMPLETED MAP has every item settled", `${m.execution_id}: ${m.unsettled} of ${m.items} unsettled`);
      }
      const output = JSON.parse(m.output ?? "null") as unknown;
      if (!Array.isArray(output) || output.length !== m.items) {
        throw new Violation("a COMPLETED MAP's output holds one value per item", `${m.execution_id}: ${m.items} items, output ${m.output}`);
      }
    }
    if (["COMPLETED", "FAILED", "SKIPPED", "CANCELLED"].includes(m.state) && m.running > 0) {
      throw new Violation("no item runs after its MAP settled", `${m.execution_id}: MAP ${m.state}, ${m.running} item(s) in flight`);
    }
  }
  const effects = new Map<string, number>();
  for (const e of world.dest.effects) if (e.key?.startsWith(`${KEY_PREFIX}-`)) effects.set(e.key, (effects.get(e.key) ?? 0) + 1);
  const { results: done } = await db
    // This run's items only (their orders carry the run's tag): earlier runs' effects were another world's.
    .prepare(`SELECT idempotency_key AS key FROM work_items WHERE state = 'COMPLETED' AND idempotency_key LIKE ?1`)
    .bind(`${KEY_PREFIX}-${world.tag}-%`)
    .all<{ key: string }>();
  for (const { key } of done) {
    if ((effects.get(key) ?? 0) !== 1) {
      throw new Violation("a COMPLETED item was charged exactly once", `${key}: ${effects.get(key) ?? 0} effect(s)`);
    }
  }
}
