// Bench: production triggers (POST /v1/workflows/:id/trigger) at 0 %, 50 % and 95 % duplicates,
// concurrency 16 and 64, side by side with a baseline that does ONE plain INSERT per request
// (POST …/trigger-baseline, bench-only): the price of atomic, visible dedupe.
import { runLoad } from "./lib/load.mjs";
import { fmt, markdownTable } from "./lib/report.mjs";

const HEADERS = { authorization: "Bearer dev-token", "content-type": "application/json" };
const DUPLICATE_POOL = 32;

// ENTRY_POINT → one TRANSFORM: each new execution writes the claim, the execution, two steps and
// sends one queue message (the consumer runs it in the same wrangler dev process).
const definition = (id) => ({
  id,
  vertices: [
    { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id" } },
    { id: "shape", type: "TRANSFORM", config: { output: { id: "= payload.order.id" } } },
  ],
  edges: [{ from: "received", to: "shape" }],
});

const post = (url, body) => ({ url, init: { method: "POST", headers: HEADERS, body: JSON.stringify(body) } });

export async function benchTriggers({ baseUrl, durationMs, concurrencies = [16, 64], duplicateRates = [0, 0.5, 0.95] }) {
  const run = Date.now().toString(36);
  const workflowId = `bench-triggers-${run}`;
  const put = await fetch(`${baseUrl}/v1/workflows/${workflowId}`, {
    method: "PUT",
    headers: HEADERS,
    body: JSON.stringify(definition(workflowId)),
  });
  if (!put.ok) throw new Error(`could not save the bench workflow: ${put.status} ${await put.text()}`);
  const triggerUrl = `${baseUrl}/v1/workflows/${workflowId}/trigger`;
  const baselineUrl = `${baseUrl}/v1/workflows/${workflowId}/trigger-baseline`;
  const probe = await fetch(baselineUrl, post(baselineUrl, { order: { id: "probe" } }).init);
  if (probe.status !== 202)
    throw new Error(`baseline route unavailable (${probe.status}); is wrangler dev serving bench/baseline-worker.ts?`);

  // Warm the isolate (and its workflow cache), the connection pool and D1.
  await runLoad({
    concurrency: 4,
    durationMs: 1_000,
    request: (i) => post(triggerUrl, { order: { id: `warm-${i}` } }),
    check: (r) => r.status === 202,
  });

  const results = [];
  for (const concurrency of concurrencies) {
    const baseline = await runLoad({
      concurrency,
      durationMs,
      request: (i) => post(baselineUrl, { order: { id: `b-${concurrency}-${i}` } }),
      check: (r) => r.status === 202,
    });
    const rows = [];
    for (const rate of duplicateRates) {
      const tag = `${concurrency}-${rate}`;
      const pool = Array.from({ length: DUPLICATE_POOL }, (_, j) => ({ order: { id: `d-${tag}-${j}` } }));
      await Promise.all(pool.map((body) => fetch(triggerUrl, post(triggerUrl, body).init).then((r) => r.arrayBuffer())));
      // Request i is a duplicate for the first `rate` share of every 100, so the mix is exact.
      const isDuplicate = (i) => i % 100 < rate * 100;
      const r = await runLoad({
        concurrency,
        durationMs,
        request: (i) => post(triggerUrl, isDuplicate(i) ? pool[i % DUPLICATE_POOL] : { order: { id: `n-${tag}-${i}` } }),
        check: (res) => res.status === 202 || res.status === 200,
      });
      rows.push({ rate, ...r });
    }
    results.push({ concurrency, baseline, triggers: rows });
  }
  return results;
}

export function formatTriggers(results) {
  const rows = [];
  for (const { concurrency, baseline, triggers } of results) {
    rows.push([
      String(concurrency),
      "baseline: one plain INSERT",
      fmt.rps(baseline.rps),
      fmt.ms(baseline.p50),
      fmt.ms(baseline.p99),
      String(baseline.errors),
      "1.00",
    ]);
    for (const t of triggers) {
      rows.push([
        String(concurrency),
        `trigger, ${Math.round(t.rate * 100)} % duplicates (202 ${t.statuses[202] ?? 0} / 200 ${t.statuses[200] ?? 0})`,
        fmt.rps(t.rps),
        fmt.ms(t.p50),
        fmt.ms(t.p99),
        String(t.errors),
        fmt.ratio(t.rps / baseline.rps),
      ]);
    }
  }
  return markdownTable(["concurrency", "route", "req/s", "p50 ms", "p99 ms", "errors", "req/s ÷ baseline"], rows);
}
