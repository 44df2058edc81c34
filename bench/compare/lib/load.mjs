/**
 * A small closed-loop load generator: `concurrency` workers take the next request from a fixed
 * list until it is empty. Bounded by construction (the list) and by a per-request timeout.
 */

/**
 * @param {Array<{ url: string, init: RequestInit }>} requests
 * @returns {Promise<{ wallMs: number, startedAt: number, results: Array<{ status: number, ms: number, body: any }> }>}
 */
export async function runClosedLoop(requests, concurrency, { timeoutMs = 30_000 } = {}) {
  const results = new Array(requests.length);
  let next = 0;
  const startedAt = Date.now();
  const t0 = performance.now();
  async function worker() {
    while (next < requests.length) {
      const i = next++;
      const { url, init } = requests[i];
      const start = performance.now();
      let status = 0;
      let body;
      try {
        const response = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
        status = response.status;
        const text = await response.text();
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
      } catch (error) {
        body = String(error);
      }
      results[i] = { status, ms: performance.now() - start, body };
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, requests.length) }, worker));
  return { wallMs: performance.now() - t0, startedAt, results };
}

/** Nearest-rank percentile of an unsorted list of numbers. */
export function percentile(values, p) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1];
}

/** Deterministic shuffle (mulberry32), so runs are comparable. */
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
