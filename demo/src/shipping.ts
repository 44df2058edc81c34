/**
 * The demo shipping API: `POST /shipping/labels` buys a label and REQUIRES an Idempotency-Key,
 * served through the same Idempotency-Key middleware as payments (its own principal, so a payments key
 * and a shipping key never collide). `GET /shipping/labels` lists labels with their keys.
 */
import { Hono } from "hono";
import { idempotency } from "../../src/http/idempotency";
import type { DemoAppEnv, DemoOptions } from "./env";
import { afterCommitFaults } from "./faults";
import { identifierOf, readJsonObject } from "./json";
import { admittedKey } from "./payments";
import { insertLabel, listLabels } from "./store";

/**
 * The ledger's principal for this route. The demo shipping API is anonymous (no API key), so all
 * of its callers share this one scope: two callers that pick the same Idempotency-Key would see
 * each other's label. That is acceptable only because there are no accounts to keep apart; an API
 * with callers scopes keys per caller, as payments does (`paymentsPrincipal`).
 */
export const SHIPPING_PRINCIPAL = "demo:shipping";

export function shippingRoutes(options: Required<DemoOptions>): Hono<DemoAppEnv> {
  const routes = new Hono<DemoAppEnv>();

  routes.post(
    "/labels",
    afterCommitFaults(options.database),
    idempotency({ principal: () => SHIPPING_PRINCIPAL, database: options.database, now: options.now }),
    async (c) => {
      const body = await readJsonObject(c.req);
      // A refusal for good (workflows/order-with-refund.json: the charge is then refunded by its compensation).
      if (body.address === "undeliverable") {
        return c.json({ title: "Undeliverable address", detail: "the carrier refuses this address; no label was bought" }, 422);
      }
      const label = await insertLabel(
        options.database(c.env),
        { idempotencyKey: admittedKey(c.req.header("idempotency-key")), order: identifierOf(body.order), request: body },
        options.now(),
      );
      return c.json({ object: "label", ...label }, 201, { location: `/shipping/labels/${label.id}` });
    },
  );

  routes.get("/labels", afterCommitFaults(options.database), async (c) =>
    c.json({
      items: await listLabels(options.database(c.env), {
        idempotencyKey: c.req.query("idempotencyKey"),
        order: c.req.query("order"),
      }),
    }),
  );

  return routes;
}
