/**
 * The model learns flow control (SPEC section 17, docs/connectors.md "Limits"): a workflow through
 * a limited connector (`modelLimited`: 1 in flight, 2 a minute — tight, so the model's sends wait), triggered for a few orders, while
 * the connector's limits are edited mid-run (operational: every execution obeys the current ones)
 * and everything else the model does — crashes, drops, cancels, erasures, retries, cron — goes on.
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
import type { Op } from "./ops";
import { prng } from "./ops";
import { Violation, type World } from "./world";

/** A trigger of the limited workflow for order `order`, or an edit of the connector's limits (`limits`: an index of LIMITS). */
export type FlowOp = { t: "flowSend"; ws: number; order: number } | { t: "flowLimits"; ws: number; limits: number };

export const FLOW_WORKFLOW = "limitedCharge";
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

/** Saves the connector and the workflow in workspace `ws` (the world's setup). */
export async function setupFlow(world: World, ws: number, dest: string): Promise<void> {
  const connector = await world.call(ws, "PUT", `/v1/connectors/${FLOW_CONNECTOR}`, flowConnector(dest));
  if (connector.status >= 300) throw new Error(`saving ${FLOW_CONNECTOR}: ${connector.status} ${await connector.text()}`);
  const workflow = await world.call(ws, "PUT", `/v1/workflows/${FLOW_WORKFLOW}`, flowWorkflow());
  if (workflow.status >= 300) throw new Error(`saving ${FLOW_WORKFLOW}: ${workflow.status} ${await workflow.text()}`);
}

/** The flow operations inserted into `ops` (about one in seven), from their own stream. */
export function withFlowOps(seed: number, ops: Op[], workspaces: number): Op[] {
  const r = prng(seed ^ FLOW_SALT);
  const out: Op[] = [];
  for (const op of ops) {
    const x = r();
    if (op.t !== "settle" && x < 0.12) out.push({ t: "flowSend", ws: Math.floor(r() * workspaces), order: Math.floor(r() * 4) });
    else if (op.t !== "settle" && x < 0.14)
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
  const payload = { order: { id: `${world.order(op.order)}-f${op.ws}`, total: 10 }, customer: "c0", note: `flow-${world.run}` };
  const res = await world.call(op.ws, "POST", `/v1/workflows/${FLOW_WORKFLOW}/trigger`, payload);
  if (res.status >= 500) throw new Violation("no 5xx", `limited trigger answered ${res.status}: ${await res.text()}`);
}

/** Never more permits held than the scope's concurrency; a step that waited has burnt no attempt. */
export async function checkFlow(world: World, shard: number): Promise<void> {
  const db = world.shardEnv(shard).DB;
  const { results: over } = await db
    .prepare(
      `SELECT l.workspace, l.connector, l.concurrency,
              (SELECT count(*) FROM connector_permits p JOIN steps s ON s.execution_id = p.execution_id AND s.vertex_id = p.vertex_id
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
      `SELECT s.execution_id, s.vertex_id, s.attempt, (SELECT count(*) FROM step_attempts a
                                                       WHERE a.execution_id = s.execution_id AND a.vertex_id = s.vertex_id) AS rows
       FROM steps s WHERE s.permit_wait IS NOT NULL`,
    )
    .all<{ execution_id: string; vertex_id: string; attempt: number; rows: number }>();
  for (const row of burnt) {
    if (row.rows < 20 && row.attempt !== row.rows) {
      throw new Violation(
        "waiting for a permit never burns an attempt",
        `${row.execution_id}/${row.vertex_id} counts ${row.attempt} attempt(s) with ${row.rows} on record`,
      );
    }
  }
}
