/**
 * A demo endpoint behind the Idempotency-Key middleware, so `npm start` shows the ledger at
 * work, plus an unguarded twin of the same handler for the benchmark (bench/ledger.mjs).
 *
 *   curl -X POST localhost:8787/demo/orders -H 'authorization: Bearer dev-token' \
 *        -H 'idempotency-key: order-1' -H 'content-type: application/json' -d '{"item":"book"}'
 *
 * Send it twice: the second answer is the first one replayed (`Idempotent-Replayed: true`).
 */
import { Hono, type Context } from "hono";
import { requireWorkspace, type AppEnv } from "../auth";
import { idempotency, principalFromContext } from "../idempotency";
import { commonProblems } from "../../lib/common-problems";

export const demoRoutes = new Hono<AppEnv>();

demoRoutes.use("*", requireWorkspace);

/** "Creates" an order: the same handler serves both routes, so the bench compares like with like. */
async function createOrder(c: Context<AppEnv>): Promise<Response> {
  let input: unknown;
  try {
    input = await c.req.json();
  } catch (error) {
    throw commonProblems.malformedJson(error instanceof Error ? error.message : "unreadable body");
  }
  const id = `ord_${crypto.randomUUID()}`;
  return c.json({ id, workspace: c.get("workspace"), order: input, createdAt: new Date().toISOString() }, 201, {
    location: `/demo/orders/${id}`,
  });
}

demoRoutes.post("/orders", idempotency({ principal: principalFromContext("workspace") }), createOrder);
demoRoutes.post("/orders-unguarded", createOrder);
