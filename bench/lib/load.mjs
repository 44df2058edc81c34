// The benches' one load generator (bench/*.mjs and bench/compare/run.mjs): a closed loop of
// `concurrency` workers, each with one request in flight, until the duration has passed or the
// request cap is reached. Loopback only; bounded in time, in count and per request.
import { performance } from "node:perf_hooks";

/**
 * @param {object} o
 * @param {number} o.concurrency
 * @param {number} [o.durationMs]  stop sending after this long (at least one of durationMs, maxRequests)
 * @param {number} [o.maxRequests]  stop after this many requests (a fixed list: its length)
 * @param {(i: number) => { url: string, init: RequestInit }} o.request  builds request number i
 * @param {(res: Response) => boolean} [o.check]  counts a response as an error when false
 * @param {number} [o.timeoutMs]  a request still unanswered after this counts as an error
 * @param {boolean} [o.keepResults]  also return every request's { status, ms, body } (body parsed
 *   as JSON when it is JSON; status 0 and the error text when the request failed)
 */
export async function runLoad({
  concurrency,
  durationMs = Infinity,
  maxRequests = Infinity,
  request,
  check = (r) => r.ok,
  timeoutMs = 30_000,
  keepResults = false,
}) {
  if (durationMs === Infinity && maxRequests === Infinity) throw new Error("runLoad needs durationMs or maxRequests");
  const latencies = [];
  const statuses = {};
  const results = keepResults ? [] : undefined;
  let errors = 0;
  let issued = 0;
  // Wall clock too: a bench compares it with the timestamps the engine writes.
  const startedAt = Date.now();
  const started = performance.now();
  const deadline = started + durationMs;

  async function worker() {
    while (performance.now() < deadline && issued < maxRequests) {
      const i = issued++;
      const { url, init } = request(i);
      const t0 = performance.now();
      let status = 0;
      let body;
      try {
        const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
        status = res.status;
        if (keepResults) body = parseBody(await res.text());
        else await res.arrayBuffer();
        latencies.push(performance.now() - t0);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (!check(res)) errors++;
      } catch (error) {
        errors++;
        body = String(error);
      }
      if (results) results[i] = { status, ms: performance.now() - t0, body };
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsedMs = performance.now() - started;
  return {
    requests: latencies.length,
    errors,
    statuses,
    startedAt,
    elapsedMs,
    rps: latencies.length / (elapsedMs / 1000),
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    results,
  };
}

function parseBody(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Nearest-rank percentile (q in 0..1] of a list of numbers, sorted or not. */
export function percentile(values, q) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** Deterministic shuffle (mulberry32), so that runs with the same seed send the same order. */
export function shuffle(list, seed) {
  let a = seed >>> 0;
  const random = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...list];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}
