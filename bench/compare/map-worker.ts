/**
 * The Cloudflare Workflows twin of bench/map.mjs's MAP (issue 43), for `npm run bench:map`'s side by
 * side. Same job, same destination, same key per item:
 *
 *   params: { order: { id, lines: [{ sku, amount }] }, concurrency }
 *   for each batch of `concurrency` lines, under Promise.all:
 *     step.do("refund <index> <sku>") → POST {REFUNDS_URL}/refunds/lines
 *       Idempotency-Key: refund-<order>-<sku>     (the idemflow twin's key expression, by hand)
 *       body: { order, sku, amount }
 *   → the output: { refunded, completedAt }
 *
 * This is how a Workflows user writes a fan-out (the issue: "1,000 `step.do` in batches under
 * `Promise.all`"): a batch waits for its slowest item before the next starts, where idemflow's MAP
 * starts the next item as soon as any settles. Each step's result is memoised by Workflows; the key
 * is built by hand, as in every engine but idemflow.
 *
 * The fetch handler: POST /instances { id, params } creates an instance (202), GET /instances/:id
 * answers its status and output, POST /instances/status { ids } many at once (the driver's polling).
 */
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";

interface Env {
  MAP_WF: Workflow<MapParams>;
  REFUNDS_URL: string;
  PAYMENTS_KEY?: string;
}

interface Line {
  sku: string;
  amount: number;
}

interface MapParams {
  order: { id: string; lines: Line[] };
  concurrency: number;
}

/** What one item's step keeps (memoised by Workflows): the idemflow twin's default collect, status and body.id. */
interface ItemResult {
  sku: string;
  status: number;
  refund: string | null;
}

export class MapWorkflow extends WorkflowEntrypoint<Env, MapParams> {
  override async run(event: Readonly<WorkflowEvent<MapParams>>, step: WorkflowStep) {
    const { order, concurrency } = event.payload;
    const results: ItemResult[] = [];
    for (let start = 0; start < order.lines.length; start += concurrency) {
      const batch = order.lines.slice(start, start + concurrency);
      const settled = await Promise.all(
        batch.map((line, offset) =>
          step.do(
            `refund ${start + offset} ${line.sku}`,
            // The idemflow twin's retry policy: 5 attempts, exponential from 500 ms.
            { retries: { limit: 4, delay: 500, backoff: "exponential" }, timeout: 10_000 },
            async (): Promise<ItemResult> => {
              const response = await fetch(`${this.env.REFUNDS_URL}/refunds/lines`, {
                method: "POST",
                headers: {
                  "content-type": "application/json",
                  "idempotency-key": `refund-${order.id}-${line.sku}`,
                  authorization: `Bearer ${this.env.PAYMENTS_KEY ?? "sk_local_demo"}`,
                },
                body: JSON.stringify({ order: order.id, sku: line.sku, amount: line.amount }),
              });
              const text = await response.text();
              // 5xx / 408 / 429 are retryable, as in the idemflow Gateway: throwing makes Workflows retry.
              if (response.status >= 500 || response.status === 408 || response.status === 429) {
                throw new Error(`refund ${line.sku}: destination answered ${response.status}`);
              }
              let id: string | null;
              try {
                id = (JSON.parse(text) as { id?: string }).id ?? null;
              } catch {
                id = null;
              }
              return { sku: line.sku, status: response.status, refund: id };
            },
          ),
        ),
      );
      results.push(...settled);
    }
    // Workers' clock advances on I/O, so this is the time the last step settled (idemflow's twin:
    // executions.finished_at).
    return { refunded: results.filter((r) => r.status === 200 || r.status === 201).length, completedAt: Date.now() };
  }
}

function json(body: unknown, status = 200): Response {
  return Response.json(body, { status });
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === "GET" && url.pathname === "/health") return json({ ok: true });

    if (request.method === "POST" && url.pathname === "/instances") {
      const { id, params } = (await request.json()) as { id: string; params: MapParams };
      try {
        await env.MAP_WF.create({ id, params });
        return json({ executionId: id, status: "queued", createdAt: Date.now() }, 202);
      } catch (error) {
        return json({ error: String(error) }, 500);
      }
    }

    if (request.method === "POST" && url.pathname === "/instances/status") {
      const { ids } = (await request.json()) as { ids: string[] };
      const items = await Promise.all(
        ids.map(async (id) => {
          try {
            const { status, error, output } = await (await env.MAP_WF.get(id)).status();
            return { id, status, error: error?.message, output };
          } catch (error) {
            return { id, status: "missing", error: String(error) };
          }
        }),
      );
      return json({ items });
    }

    const match = /^\/instances\/([^/]+)$/.exec(url.pathname);
    if (request.method === "GET" && match) {
      try {
        return json(await (await env.MAP_WF.get(decodeURIComponent(match[1]!))).status());
      } catch (error) {
        return json({ error: String(error) }, 404);
      }
    }
    return json({ error: "not found" }, 404);
  },
};
