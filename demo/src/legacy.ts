/**
 * The demo legacy order system: NO Idempotency-Key support, only a natural unique key.
 * `GET /legacy/orders?external_id=` answers `{ items: [...] }` (empty when there is none) and
 * `POST /legacy/orders` creates one; a second POST with the same `external_id` answers 409.
 * Workflows protect it with read-verify-write plus 409-as-processed (workflows/legacy-sync.json).
 */
import { Hono } from "hono";
import { ProblemError } from "../../src/lib/problem";
import type { DemoAppEnv, DemoOptions } from "./env";
import { afterCommitFaults } from "./faults";
import { identifierOf, readJsonObject } from "./json";
import { insertLegacyOrderIfAbsent, listLegacyOrders } from "./store";

export function legacyRoutes(options: Required<DemoOptions>): Hono<DemoAppEnv> {
  const routes = new Hono<DemoAppEnv>();

  routes.get("/orders", afterCommitFaults(options.database), async (c) =>
    c.json({ items: await listLegacyOrders(options.database(c.env), { externalId: c.req.query("external_id") }) }),
  );

  routes.post("/orders", afterCommitFaults(options.database), async (c) => {
    const body = await readJsonObject(c.req);
    const externalId = identifierOf(body.external_id);
    if (externalId === null) {
      throw new ProblemError({
        status: 422,
        code: "demo-legacy-external-id-missing",
        title: "external_id is required",
        detail: "Send a JSON object with a non-empty `external_id` (string or number).",
      });
    }
    const order = await insertLegacyOrderIfAbsent(options.database(c.env), { externalId, request: body }, options.now());
    if (!order) {
      throw new ProblemError({
        status: 409,
        code: "demo-legacy-duplicate",
        title: "An order with this external_id exists",
        detail: `external_id ${JSON.stringify(externalId)} was already created. GET /legacy/orders?external_id=… to read it.`,
      });
    }
    return c.json({ object: "legacy_order", ...order }, 201, { location: `/legacy/orders?external_id=${encodeURIComponent(externalId)}` });
  });

  return routes;
}
