/**
 * The model learns flow control (SPEC section 17, docs/connectors.md "Limits"): a workflow through
 * a limited connector (`modelLimited`: 1 in flight, 2 a minute — tight, so the model's sends wait), triggered for a few orders, while
 * the connector's limits are edited mid-run (operational: every execution obeys the current ones)
 * and everything else the model does — crashes, drops, cancels, erasures, retries, cron — goes on.
 * A third of the sends go to `limitedRefunds` instead: a MAP whose items take the same scope's permits.
 *
 * The invariants:
 * - **never more than `concurrency` permits held** in a scope: the live permits (their step EXECUTING
 *   under the epoch that took them, unparked, leased) never outnumber its current concurrency;
 * - **waiting never burns attempts**: a step that waited for a permit has exactly one attempt on
 *   record per attempt it counts (`attempt` = its attempt rows, below the trim) — a wait wrote none
 *   and took its claim's back.
 *
 * The operations come from a stream of their own (seed ^ `FLOW_SALT`) and are inserted among the
 * others: the existing seeds keep every operation and operand they had.
 */
import { RUNNING_UNRECORDED } from "../../src/ledger/attempts";
import { ITEM_ROWS } from "../../src/ledger/work-rows";
import type { Op } from "./ops";
import { prng } from "./ops";
import { Violation, type World } from "./world";

/**
 * A trigger of the limited workflow for order `order` — or, with `lines`, of the limited MAP over that
 * many lines — or an edit of the connector's limits (`limits`: an index of LIMITS).
 */
export type FlowOp = { t: "flowSend"; ws: number; order: number; lines?: number } | { t: "flowLimits"; ws: number; limits: number };

export const FLOW_WORKFLOW = "limitedCharge";
/** A MAP whose items go through the same limited connector (its items take the scope's permits too). */
export const FLOW_MAP_WORKFLOW = "limitedRefunds";
export const FLOW_CONNECTOR = "modelLimited";
const FLOW_SALT = 0x6c1f3a27;
/** The limits an edit chooses among (the first is the one saved at setup). */
const LIMITS = [{ concurrency: 1, rate: "2/m" }, { concurrency: 1 }, { rate: "1/m" }, { concurrency: 2, rate: "10/m", burst: 3 }] as const;

export function flowConnector(dest: string, limits: object = LIMITS[0]): unknown {
  return {
    name: FLOW_CONNECTOR,
    baseUrl: `${dest}/payments`,
    headers: { "Content-Type": "application/json" },
    key: { profile: "stripe", rule: { fields: ["order"], format: "plain" } },
    retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000 },
    limits,
  };
}

export function flowWorkflow(): unknown {
  return {
    id: FLOW_WORKFLOW,
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", dedupeWindow: "1m" } },
      {
        id: "charge",
        type: "GATEWAY",
        config: {
          connector: FLOW_CONNECTOR,
          operation: "fcharge",
          method: "POST",
          path: "/charges",
          keyFields: { order: "= payload.order.id" },
          body: "= { 'order': payload.order.id }",
        },
      },
    ],
    edges: [{ from: "entry", to: "charge" }],
  };
}

export function flowMapWorkflow(): unknown {
  return {
    id: FLOW_MAP_WORKFLOW,
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", dedupeWindow: "1m" } },
      {
        id: "refund",
        type: "MAP",
        config: {
          items: "= payload.order.lines",
          as: "line",
          concurrency: 3,
          maxItems: 10,
          step: {
            type: "GATEWAY",
            config: {
              connector: FLOW_CONNECTOR,
              operation: "frefund",
              method: "POST",
              path: "/charges",
              keyFields: { order: "= payload.order.id & '-' & line.sku" },
              body: "= { 'order': payload.order.id, 'sku': line.sku }",
            },
          },
        },
      },
    ],
    edges: [{ from: "entry", to: "refund" }],
  };
}

/** Saves the connector and the workflows in workspace `ws` (the world's setup). */
export async function setupFlow(world: World, ws: number, dest: string): Promise<void> {
  const connector = await world.call(ws, "PUT", `/v1/connectors/${FLOW_CONNECTOR}`, flowConnector(dest));
  if (connector.status >= 300) throw new Error(`saving ${FLOW_CONNECTOR}: ${connector.status} ${await connector.text()}`);
  const workflow = await world.call(ws, "PUT", `/v1/workflows/${FLOW_WORKFLOW}`, flowWorkflow());
  if (workflow.status >= 300) throw new Error(`saving ${FLOW_WORKFLOW}: ${workflow.status} ${await workflow.text()}`);
  const map = await world.call(ws, "PUT", `/v1/workflows/${FLOW_MAP_WORKFLOW}`, flowMapWorkflow());
  if (map.status >= 300) throw new Error(`saving ${FLOW_MAP_WORKFLOW}: ${map.status} ${await map.text()}`);
}

/** The flow operations inserted into `ops` (about one in seven), from their own stream. */
export function withFlowOps(seed: number, ops: Op[], workspaces: number): Op[] {
  const r = prng(seed ^ FLOW_SALT);
  const out: Op[] = [];
  for (const op of ops) {
    const x = r();
    if (op.t !== "settle" && x < 0.12) {
      // A third of the sends go to the limited MAP (from the draw already made: the stream is unchanged), 2–4 lines.
      const send: FlowOp = { t: "flowSend", ws: Math.floor(r() * workspaces), order: Math.floor(r() * 4) };
      out.push(x < 0.04 ? { ...send, lines: 2 + Math.floor(x * 75) } : send);
    } else if (op.t !== "settle" && x < 0.14)
      out.push({ t: "flowLimits", ws: Math.floor(r() * workspaces), limits: Math.floor(r() * LIMITS.length) });
    out.push(op);
  }
  return out;
}

export async function applyFlowOp(world: World, op: FlowOp, dest: string): Promise<void> {
  if (op.t === "flowLimits") {
    const res = await world.call(op.ws, "PUT", `/v1/connectors/${FLOW_CONNECTOR}`, flowConnector(dest, LIMITS[op.limits % LIMITS.length]));
    if (res.status >= 300) throw new Violation("no 5xx", `editing the limits answered ${res.status}: ${await res.text()}`);
    return;
  }
  const lines = op.lines === undefined ? undefined : Array.from({ length: op.lines }, (_, i) => ({ sku: `L${i}` }));
  const order = { id: `${world.order(op.order)}-f${lines ? "m" : ""}${op.ws}`, total: 10, ...(lines ? { lines } : {}) };
  const payload = { order, customer: "c0", note: `flow-${world.run}` };
  const res = await world.call(op.ws, "POST", `/v1/workflows/${lines ? FLOW_MAP_WORKFLOW : FLOW_WORKFLOW}/trigger`, payload);
  if (res.status >= 500) throw new Violation("no 5xx", `limited trigger answered ${res.status}: ${await res.text()}`);
}

/** Never more permits held than the scope's concurrency; a step that waited has burnt no attempt. */
export async function checkFlow(world: World, shard: number): Promise<void> {
  const db = world.shardEnv(shard).DB;
  const { results: over } = await db
    .prepare(
      `SELECT l.workspace, l.connector, l.concurrency,
              (SELECT count(*) FROM connector_permits p
               JOIN (SELECT execution_id, vertex_id AS name, epoch, state, parked_until, lease_until FROM steps
                     UNION ALL SELECT execution_id, row_key, epoch, state, parked_until, lease_until FROM work_items) s
                 ON s.execution_id = p.execution_id AND s.name = p.vertex_id
               WHERE p.workspace = l.workspace AND p.connector = l.connector AND p.held = 1 AND s.epoch = p.epoch
                 AND s.state = 'EXECUTING' AND s.parked_until IS NULL AND s.lease_until > ?1) AS held
       FROM connector_limits l WHERE l.connector = ?2 AND l.concurrency IS NOT NULL`,
    )
    .bind(world.t, FLOW_CONNECTOR)
    .all<{ workspace: string; connector: string; concurrency: number; held: number }>();
  for (const row of over) {
    if (row.held > row.concurrency) {
      throw new Violation(
        "never more than `concurrency` permits held",
        `${row.workspace}/${row.connector}: ${row.held} held, concurrency ${row.concurrency}`,
      );
    }
  }
  const { results: burnt } = await db
    .prepare(
      // A step's running attempt has no row until it ends (migrations/0040): it counts as the trace shows it.
      `SELECT s.execution_id, s.vertex_id, s.attempt, (SELECT count(*) FROM step_attempts a
                                                       WHERE a.execution_id = s.execution_id AND a.vertex_id = s.vertex_id)
                                                      + (${RUNNING_UNRECORDED("s")}) AS rows
       FROM steps s WHERE s.permit_wait IS NOT NULL`,
    )
    .all<{ execution_id: string; vertex_id: string; attempt: number; rows: number }>();
  // A parked permit waiter, step or MAP item, shows its wait in the trace (steps.permit_wait, work_items.permit_wait: 0035).
  const { results: unshown } = await db
    .prepare(
      `SELECT p.execution_id, p.vertex_id FROM connector_permits p
       WHERE p.held = 0 AND p.connector = ?1 AND (
         EXISTS (SELECT 1 FROM steps s WHERE s.execution_id = p.execution_id AND s.vertex_id = p.vertex_id
                   AND s.state = 'EXECUTING' AND s.parked_until IS NOT NULL AND s.permit_wait IS NULL)
         OR EXISTS (SELECT 1 FROM work_items w WHERE w.execution_id = p.execution_id AND w.row_key = p.vertex_id
                   AND w.state = 'EXECUTING' AND w.parked_until IS NOT NULL AND w.permit_wait IS NULL))`,
    )
    .bind(FLOW_CONNECTOR)
    .all<{ execution_id: string; vertex_id: string }>();
  if (unshown.length > 0) {
    const first = unshown[0]!;
    throw new Violation("a parked permit waiter shows its wait", `${first.execution_id}/${first.vertex_id} is parked with no permit_wait`);
  }
  // The limited MAP's items (every item of it is checked, waited or not); a running attempt has no row until it ends (migrations/0041).
  const { results: items } = await db
    .prepare(
      `SELECT w.execution_id, w.row_key AS vertex_id, w.attempt, (SELECT count(*) FROM step_attempts a
                                                                 WHERE a.execution_id = w.execution_id AND a.vertex_id = w.row_key)
                                                                + (${RUNNING_UNRECORDED("w", ITEM_ROWS)}) AS rows
       FROM work_items w JOIN executions e ON e.id = w.execution_id WHERE e.workflow_id = ?1`,
    )
    .bind(FLOW_MAP_WORKFLOW)
    .all<{ execution_id: string; vertex_id: string; attempt: number; rows: number }>();
  for (const row of [...burnt, ...items]) {
    if (row.rows < 20 && row.attempt !== row.rows) {
      throw new Violation(
        "waiting for a permit never burns an attempt",
        `${row.execution_id}/${row.vertex_id} counts ${row.attempt} attempt(s) with ${row.rows} on record`,
      );
    }
  }
}
