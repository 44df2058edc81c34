/**
 * The demo legacy order system: NO Idempotency-Key support, only a natural unique key.
 * `GET /legacy/orders?external_id=` answers `{ items: [...] }` (empty when there is none) and
 * `POST /legacy/orders` creates one; a second POST with the same `external_id` answers 409.
 * Workflows protect it with read-verify-write plus 409-as-processed (workflows/legacy-sync.json).
 */
import { Hono } from "hono";
import type { DemoAppEnv, DemoOptions } from "./env";
import { afterCommitFaults } from "./faults";
import { identifierOf, readJsonObject } from "./json";
import { demoProblems } from "./problems";
import { insertLegacyOrderIfAbsent, listLegacyOrders } from "./store";

export function legacyRoutes(options: Required<DemoOptions>): Hono<DemoAppEnv> {
  const routes = new Hono<DemoAppEnv>();

  routes.get("/orders", afterCommitFaults(options.database), async (c) =>
    c.json({ items: await listLegacyOrders(options.database(c.env), { externalId: c.req.query("external_id") }) }),
  );

  routes.post("/orders", afterCommitFaults(options.database), async (c) => {
    const body = await readJsonObject(c.req);
    const externalId = identifierOf(body.external_id);
    if (externalId === null) throw demoProblems.legacyExternalIdMissing();
    const order = await insertLegacyOrderIfAbsent(options.database(c.env), { externalId, request: body }, options.now());
    if (!order) throw demoProblems.legacyDuplicate(externalId);
    return c.json({ object: "legacy_order", ...order }, 201, { location: `/legacy/orders?external_id=${encodeURIComponent(externalId)}` });
  });

  return routes;
}
