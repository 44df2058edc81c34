// Bench: the same handler (POST /demo/orders*) with and without the Idempotency-Key
// middleware, at several concurrencies, with fresh keys and with replays.
import { runLoad } from "./lib/load.mjs";
import { fmt, markdownTable } from "./lib/report.mjs";

const HEADERS = { authorization: "Bearer dev-token", "content-type": "application/json" };
const BODY = JSON.stringify({ item: "book", quantity: 1 });
const REPLAY_POOL = 64;

const post = (url, key) => ({ url, init: { method: "POST", headers: { ...HEADERS, "idempotency-key": key }, body: BODY } });
const created = (res) => res.status === 201;
const executed = (res) => res.status === 201 && res.headers.get("idempotent-replayed") === null;
const replayed = (res) => res.status === 201 && res.headers.get("idempotent-replayed") === "true";

export async function benchLedger({ baseUrl, durationMs, concurrencies = [1, 16, 64] }) {
  const run = Date.now().toString(36);
  const unguardedUrl = `${baseUrl}/demo/orders-unguarded`;
  const guardedUrl = `${baseUrl}/demo/orders`;

  // Warm the isolate, the connection pool and D1 before measuring.
  await runLoad({ concurrency: 4, durationMs: 1_000, request: (i) => post(guardedUrl, `warm-${run}-${i}`), check: created });

  const results = [];
  for (const concurrency of concurrencies) {
    const unguarded = await runLoad({
      concurrency,
      durationMs,
      request: (i) => post(unguardedUrl, `u-${run}-${concurrency}-${i}`),
      check: created,
    });
    const fresh = await runLoad({
      concurrency,
      durationMs,
      request: (i) => post(guardedUrl, `f-${run}-${concurrency}-${i}`),
      check: executed,
    });
    const pool = Array.from({ length: REPLAY_POOL }, (_, j) => `r-${run}-${concurrency}-${j}`);
    await Promise.all(pool.map((key) => fetch(post(guardedUrl, key).url, post(guardedUrl, key).init).then((r) => r.arrayBuffer())));
    const replay = await runLoad({ concurrency, durationMs, request: (i) => post(guardedUrl, pool[i % REPLAY_POOL]), check: replayed });
    results.push({ concurrency, unguarded, fresh, replay });
  }
  return results;
}

export function formatLedger(results) {
  const rows = [];
  for (const { concurrency, unguarded, fresh, replay } of results) {
    for (const [mode, r] of [
      ["unguarded", unguarded],
      ["guarded, fresh keys", fresh],
      ["guarded, replays", replay],
    ]) {
      const isBase = r === unguarded;
      rows.push([
        String(concurrency),
        mode,
        fmt.rps(r.rps),
        fmt.ms(r.p50),
        fmt.ms(r.p99),
        String(r.errors),
        isBase ? "1.00" : fmt.ratio(r.rps / unguarded.rps),
        isBase ? "1.00" : fmt.ratio(r.p50 / unguarded.p50),
      ]);
    }
  }
  return markdownTable(["concurrency", "route", "req/s", "p50 ms", "p99 ms", "errors", "req/s ÷ unguarded", "p50 ÷ unguarded"], rows);
}
