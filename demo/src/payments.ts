/**
 * The demo payments API: `POST /payments/charges` creates a charge and REQUIRES an
 * Idempotency-Key; it is served through idemflow's own Idempotency-Key middleware, exactly the way a user
 * would make their own Worker endpoint idempotent. `GET /payments/charges` lists every charge with
 * the key it was created under, so a duplicate charge is visible at a glance.
 *
 * A charge whose body says `"confirmWebhook": true` is also confirmed asynchronously: a moment
 * later a signed `charge.succeeded` webhook goes to the engine's event source, twice
 * (./confirmations.ts); `GET /payments/webhooks` lists those deliveries and the engine's answers.
 */
import { Hono, type MiddlewareHandler } from "hono";
import { idempotency, parseIdempotencyKey } from "../../src/http/idempotency";
import { sha256Hex } from "../../src/lib/crypto";
import type { ConfirmationOptions, DemoAppEnv, DemoOptions } from "./env";
import { afterCommitFaults } from "./faults";
import { identifierOf, readJsonObject } from "./json";
import { demoProblems } from "./problems";
import { confirmCharge } from "./confirmations";
import { insertCharge, listCharges, listWebhookDeliveries } from "./store";

/**
 * The ledger's principal for this route: the caller's account, derived on the server from its API
 * key, so two callers that happen to send the same Idempotency-Key never see each other's charge.
 * The demo has no account table, so the account IS the key; the ledger stores a SHA-256 of it,
 * never the secret itself (a real API would use the merchant id its key authenticates to).
 */
export async function paymentsPrincipal(request: Request, scope = "payments"): Promise<string> {
  const token = bearerToken(request.headers.get("authorization"));
  // requireBearer runs first; without a key there is no account to scope the ledger to.
  if (token === null) throw new Error("paymentsPrincipal: no bearer token; mount it after requireBearer");
  return `demo:${scope}:${await sha256Hex(token)}`;
}

/**
 * A payments API of its own: `payments` remembers keys 24 hours (the middleware's default, like
 * Stripe); `forgetful` only `retentionMs`, so a re-send after that charges again — the destination
 * the retention guard exists for (docs/steps.md "The retention guard").
 */
export interface PaymentsApi {
  scope: "payments" | "forgetful";
  retentionMs?: number;
}

function bearerToken(header: string | null): string | null {
  return /^Bearer\s+(\S+)\s*$/i.exec(header ?? "")?.[1] ?? null;
}

/** Like a real payment API, refuse anonymous calls (the workflow sends `{{ secrets.PAYMENTS_KEY }}`). */
const requireBearer: MiddlewareHandler<DemoAppEnv> = async function requireBearer(c, next) {
  if (bearerToken(c.req.header("authorization") ?? null) === null) throw demoProblems.unauthorized();
  await next();
};

/** The key the ledger admitted this request under (the middleware already validated it). */
export function admittedKey(header: string | undefined): string {
  const parsed = parseIdempotencyKey(header ?? "");
  if (!parsed.ok) throw new Error("unreachable: the idempotency middleware admits only valid keys");
  return parsed.key;
}

export function paymentRoutes(
  options: Required<DemoOptions> & { confirmations: ConfirmationOptions },
  api: PaymentsApi = { scope: "payments" },
): Hono<DemoAppEnv> {
  const routes = new Hono<DemoAppEnv>();
  const principal = (request: Request) => paymentsPrincipal(request, api.scope);

  routes.post(
    "/charges",
    afterCommitFaults(options.database),
    requireBearer,
    idempotency({ principal, database: options.database, now: options.now, retentionMs: api.retentionMs }),
    async (c) => {
      const body = await readJsonObject(c.req);
      const amount = body.amount;
      if (amount !== undefined && (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0))
        throw demoProblems.chargeInvalid();
      const charge = await insertCharge(
        options.database(c.env),
        {
          idempotencyKey: admittedKey(c.req.header("idempotency-key")),
          order: identifierOf(body.order),
          amount: amount ?? null,
          request: body,
        },
        options.now(),
      );
      // Only when asked, so every other caller of the demo sees no webhook.
      if (body.confirmWebhook === true) {
        c.executionCtx.waitUntil(confirmCharge(c.env, options.database(c.env), options.confirmations, charge, options.now));
      }
      return c.json({ object: "charge", ...charge }, 201, { location: `/payments/charges/${charge.id}` });
    },
  );

  routes.get("/charges", afterCommitFaults(options.database), async (c) =>
    c.json({
      items: await listCharges(options.database(c.env), {
        idempotencyKey: c.req.query("idempotencyKey"),
        order: c.req.query("order"),
      }),
    }),
  );

  routes.get("/webhooks", async (c) =>
    c.json({ items: await listWebhookDeliveries(options.database(c.env), { order: c.req.query("order") }) }),
  );

  return routes;
}
