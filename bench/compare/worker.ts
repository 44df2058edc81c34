/**
 * The Cloudflare Workflows twin of bench/compare/order-charge.workflow.json, for the side-by-side
 * benchmark (issue 7). Same job, same destination, same destination key:
 *
 *   entry (the instance's params: { order: { id, total } })
 *   → "charge":  POST {PAYMENTS_URL}/payments/charges with
 *                Idempotency-Key = $idempotencyKey('charge', order.id)   (the engine's own helper)
 *   → "receipt": a pure transform of the charge result.
 *
 * The fetch handler is the bench's "trigger route": it maps one HTTP request to one
 * `env.WF.create({ id, params })`, which is how a Worker starts a Workflow instance. A duplicate
 * trigger is a create with an id that already exists; Workflows rejects it, and the route reports
 * that as `deduplicated: true` (the same shape the idemflow trigger route answers with).
 */
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { idempotencyKey } from "../../src/expressions/key-helpers";

interface Env {
  WF: Workflow<ChargeParams>;
  PAYMENTS_URL: string;
  PAYMENTS_KEY?: string;
}

interface ChargeParams {
  order: { id: string; total: number };
  /**
   * Fault injection for the correctness run: on the charge step's first attempt, throw AFTER the
   * destination answered (the worker "dies" between the side effect and recording it).
   */
  throwAfterCharge?: boolean;
}

type ChargeResult = {
  status: number;
  idempotencyKey: string;
  /** The destination's response body, as text (step outputs must be serialisable). */
  body: string;
};

/**
 * How many times each instance's charge callback ran, in this isolate (`wrangler dev` runs one).
 * A diagnostic only: it shows whether a duplicate create or a retry re-ran the side effect.
 */
const chargeCalls = new Map<string, string[]>();

function recordChargeCall(instanceId: string, outcome: string): void {
  chargeCalls.set(instanceId, [...(chargeCalls.get(instanceId) ?? []), outcome]);
}

export class ChargeWorkflow extends WorkflowEntrypoint<Env, ChargeParams> {
  override async run(event: Readonly<WorkflowEvent<ChargeParams>>, step: WorkflowStep) {
    const { order, throwAfterCharge } = event.payload;
    const charge = await step.do(
      "charge",
      // Mirrors the idemflow Gateway retry policy of the twin definition (5 attempts, short delay).
      { retries: { limit: 4, delay: 100, backoff: "constant" }, timeout: 10_000 },
      async (ctx): Promise<ChargeResult> => {
        const key = await idempotencyKey("charge", order.id);
        let response: Response;
        try {
          response = await fetch(`${this.env.PAYMENTS_URL}/payments/charges`, {
            method: "POST",
            headers: {
              "content-type": "application/json",
              "idempotency-key": key,
              authorization: `Bearer ${this.env.PAYMENTS_KEY ?? "sk_local_demo"}`,
            },
            body: JSON.stringify({ order: order.id, amount: order.total }),
          });
        } catch (error) {
          recordChargeCall(event.instanceId, `attempt ${ctx.attempt}: network error ${String(error)}`);
          throw error;
        }
        const text = await response.text();
        // 5xx / 408 / 429 are retryable, as in the idemflow Gateway: throwing makes Workflows retry.
        if (response.status >= 500 || response.status === 408 || response.status === 429) {
          recordChargeCall(event.instanceId, `attempt ${ctx.attempt}: ${response.status}, retrying`);
          throw new Error(`charge: destination answered ${response.status}`);
        }
        if (throwAfterCharge && ctx.attempt === 1) {
          recordChargeCall(event.instanceId, `attempt ${ctx.attempt}: ${response.status}, then injected crash`);
          throw new Error("charge: injected crash after the destination call");
        }
        recordChargeCall(event.instanceId, `attempt ${ctx.attempt}: ${response.status}`);
        return { status: response.status, idempotencyKey: key, body: text };
      },
    );
    return step.do("receipt", async () => ({
      order: order.id,
      charged: charge.status === 201 || charge.status === 200,
      key: charge.idempotencyKey,
      // Workers' clock advances on I/O, so this is the time the last step ran; the driver
      // computes end-to-end throughput from it (idemflow's twin is executions.finished_at).
      completedAt: Date.now(),
    }));
  }
}

function json(body: unknown, status = 200): Response {
  return Response.json(body, { status });
}

/** Workflows answers a duplicate id with an error whose message names the conflict. */
function isAlreadyExists(error: unknown): boolean {
  return /already.?exists|already been created|duplicate/i.test(errorMessage(error));
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);

    if (request.method === "GET" && url.pathname === "/health") return json({ ok: true });

    // POST /instances { id, params } — the trigger.
    if (request.method === "POST" && url.pathname === "/instances") {
      const { id, params } = (await request.json()) as { id: string; params: ChargeParams };
      try {
        await env.WF.create({ id, params });
        return json({ executionId: id, deduplicated: false, status: "queued" }, 202);
      } catch (error) {
        // `reason` keeps Workflows' own words visible in the bench output.
        if (isAlreadyExists(error)) return json({ executionId: id, deduplicated: true, reason: errorMessage(error) }, 200);
        return json({ error: String(error) }, 500);
      }
    }

    // POST /instances/status { ids } — one round trip for the driver's completion polling.
    if (request.method === "POST" && url.pathname === "/instances/status") {
      const { ids } = (await request.json()) as { ids: string[] };
      const counts: Record<string, number> = {};
      const errors: string[] = [];
      const complete: string[] = [];
      let lastCompletedAt = 0;
      await Promise.all(
        ids.map(async (id) => {
          try {
            const { status, error, output } = await (await env.WF.get(id)).status();
            counts[status] = (counts[status] ?? 0) + 1;
            if (status === "complete") {
              complete.push(id);
              const at = (output as { completedAt?: number } | undefined)?.completedAt ?? 0;
              lastCompletedAt = Math.max(lastCompletedAt, at);
            }
            if (error && errors.length < 3) errors.push(`${id}: ${error.message}`);
          } catch (error) {
            counts.missing = (counts.missing ?? 0) + 1;
            if (errors.length < 3) errors.push(`${id}: ${String(error)}`);
          }
        }),
      );
      return json({ counts, complete, lastCompletedAt, errors });
    }

    // GET /instances/:id — one instance's status and output.
    const match = /^\/instances\/([^/]+)$/.exec(url.pathname);
    if (request.method === "GET" && match) {
      try {
        const id = decodeURIComponent(match[1]!);
        const calls = chargeCalls.get(id) ?? [];
        return json({ ...(await (await env.WF.get(id)).status()), chargeCalls: calls.length, chargeOutcomes: calls });
      } catch (error) {
        return json({ error: String(error) }, 404);
      }
    }

    return json({ error: "not found" }, 404);
  },
};
