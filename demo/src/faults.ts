/**
 * `POST /faults`: make the next `count` matching requests do their work and then answer 502.
 *
 * This is the "response lost" case destination keys exist for: the charge is committed (and the
 * ledger has stored its 201), but the caller sees a 502 and retries. A retry with the same
 * Idempotency-Key is answered from the ledger (`Idempotent-Replayed: true`) — one charge.
 *
 * The fault middleware therefore sits OUTSIDE the idempotency middleware: it lets the whole inner
 * chain finish (work + ledger completion) and only then swaps the answer.
 */
import { Hono, type MiddlewareHandler } from "hono";
import type { DemoAppEnv, DemoEnv, DemoOptions } from "./env";
import { armFault, disarmFaults, fireFault, listFaults } from "./store";
import { readJsonObject } from "./json";
import { demoProblems } from "./problems";

const FAULT_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/** Wraps a destination route: after its work is done, fire an armed fault if one matches. */
export function afterCommitFaults(database: (env: DemoEnv) => D1Database): MiddlewareHandler<DemoAppEnv> {
  return async function afterCommitFaults(c, next) {
    await next();
    // Only a request that succeeded (did its work) can lose its answer: a 4xx or 5xx leaves the
    // fault armed for the next one.
    if (c.res.status < 200 || c.res.status > 299) return;
    const fault = await fireFault(database(c.env), c.req.method, new URL(c.req.url).pathname);
    if (!fault) return;
    console.log(
      `demo: fault #${fault.id} fired on ${c.req.method} ${fault.path} (answered ${c.res.status}, sending 502; ${fault.remaining} left)`,
    );
    // Clear first: assigning c.res over an existing response would copy its headers (location,
    // Idempotent-Replayed, …) onto the 502, which a real lost response would not carry.
    c.res = undefined;
    c.res = demoProblems.faultAfterCommit(fault.id).toResponse();
  };
}

export function faultRoutes(options: Required<DemoOptions>): Hono<DemoAppEnv> {
  const routes = new Hono<DemoAppEnv>();

  routes.post("/", async (c) => {
    const body = await readJsonObject(c.req);
    const path = body.path;
    const mode = body.mode ?? "after-commit";
    const count = body.count ?? 1;
    const method = typeof body.method === "string" ? body.method.toUpperCase() : "POST";
    const errors: string[] = [];
    if (typeof path !== "string" || !path.startsWith("/")) errors.push('`path` must be a request path such as "/payments/charges"');
    if (mode !== "after-commit") errors.push('`mode` must be "after-commit" (the only mode)');
    if (typeof count !== "number" || !Number.isInteger(count) || count < 1 || count > 1000)
      errors.push("`count` must be an integer from 1 to 1000");
    if (!FAULT_METHODS.includes(method)) errors.push(`\`method\` must be one of ${FAULT_METHODS.join(", ")} (default POST)`);
    if (errors.length > 0) throw demoProblems.faultInvalid(errors);
    const fault = await armFault(
      options.database(c.env),
      { method, path: path as string, mode: "after-commit", count: count as number },
      options.now(),
    );
    return c.json({ fault }, 201);
  });

  routes.get("/", async (c) => c.json({ items: await listFaults(options.database(c.env)) }));

  routes.delete("/", async (c) => c.json({ disarmed: await disarmFaults(options.database(c.env)) }));

  return routes;
}
