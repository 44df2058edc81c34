// A small closed-loop load generator: `concurrency` workers each send one request at a time
// until the duration or the request cap is reached. Loopback only; bounded in time and count.
import { performance } from "node:perf_hooks";

/**
 * @param {object} o
 * @param {number} o.concurrency
 * @param {number} o.durationMs
 * @param {number} [o.maxRequests]
 * @param {(i: number) => { url: string, init: RequestInit }} o.request  builds request number i
 * @param {(res: Response) => boolean} [o.check]  counts a response as an error when false
 */
export async function runLoad({ concurrency, durationMs, maxRequests = Infinity, request, check = (r) => r.ok }) {
  const latencies = [];
  const statuses = {};
  let errors = 0;
  let issued = 0;
  const started = performance.now();
  const deadline = started + durationMs;

  async function worker() {
    while (performance.now() < deadline && issued < maxRequests) {
      const { url, init } = request(issued++);
      const t0 = performance.now();
      try {
        const res = await fetch(url, init);
        await res.arrayBuffer();
        latencies.push(performance.now() - t0);
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
        if (!check(res)) errors++;
      } catch {
        errors++;
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsedMs = performance.now() - started;
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    statuses,
    elapsedMs,
    rps: latencies.length / (elapsedMs / 1000),
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
  };
}

export function percentile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}
