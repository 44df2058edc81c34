import { describe, expect, it } from "vitest";
import { chargeWorkflow, DEST, executionStatus, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-gateway";

async function run(charge: Record<string, unknown>, payload: unknown = { order: { id: unique("O"), total: 10 } }, rt = {}) {
  const h = harness(rt);
  const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf"), charge));
  const id = await h.start(wf, payload);
  return { h, id };
}

describe("Gateway retries", () => {
  it("503, 503, 201 → COMPLETED after 3 attempts, all with one key, charged once", async () => {
    const { h, id } = await run({});
    h.dest.fault("/payments/charges", 503, 2);
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.charge!.state).toBe("COMPLETED");
    expect(steps.charge!.attempt).toBe(3);
    const keys = h.dest.keysSent("/payments/charges");
    expect(keys).toHaveLength(3);
    expect(new Set(keys).size).toBe(1);
    expect(h.dest.effects).toHaveLength(1);
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("waits at least Retry-After on a 429 before the next attempt", async () => {
    const { h, id } = await run({ retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 100, maxDelayMs: 120_000 } });
    h.dest.fault("/payments/charges", 429, 1, { headers: { "retry-after": "120" } });
    const [msg] = h.queue.take();
    const t0 = h.clock.now();
    await h.deliver([msg!.body]);
    const [retry] = h.queue.take();
    expect(retry!.dueAt - t0).toBeGreaterThanOrEqual(120_000);
    // Delivered early (a queue may), it is not claimed: it bounces until the step is due.
    const early = await h.deliver([retry!.body]);
    expect(early.retryDelays[0]).toBeGreaterThanOrEqual(119);
    expect(h.dest.requests).toHaveLength(1);
    h.clock.t = retry!.dueAt;
    await h.deliver([retry!.body]);
    await h.drain();
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
  });

  it(
    "a Retry-After longer than the queue's 12-hour delay limit is still honoured: the early message bounces, nothing " + "is sent",
    async () => {
      const { h, id } = await run({ retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 100, maxDelayMs: 24 * 3_600_000 } });
      h.dest.fault("/payments/charges", 503, 1, { headers: { "retry-after": String(24 * 3600) } });
      const [msg] = h.queue.take();
      const t0 = h.clock.now();
      await h.deliver([msg!.body]);
      const [retry] = h.queue.take();
      expect(retry!.dueAt - t0).toBe(12 * 3_600_000); // the queue's own limit
      h.clock.t = retry!.dueAt;
      const early = await h.deliver([retry!.body]);
      expect(early.retryDelays[0]).toBe(12 * 3600); // bounces: the step is due in 12 more hours
      expect(h.dest.requests).toHaveLength(1);
      expect((await stepsOf(id)).charge!.state).toBe("DISPATCHED");
      h.clock.t = t0 + 24 * 3_600_000;
      await h.deliver([retry!.body]);
      await h.drain();
      expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
      expect(h.dest.requests).toHaveLength(2);
    },
  );

  it("gives up after maxAttempts with the last error, FAILED", async () => {
    const { h, id } = await run({});
    h.dest.fault("/payments/charges", 500, 3);
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.charge!.state).toBe("FAILED");
    expect(steps.charge!.attempt).toBe(3);
    expect(steps.charge!.error).toMatch(/gave up after 3 attempt/);
    expect(steps.done).toBeUndefined();
    expect(await executionStatus(id)).toBe("FAILED");
  });

  it("400 → FAILED at once, not retried", async () => {
    const { h, id } = await run({ url: `${DEST}/bad` });
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.charge!.state).toBe("FAILED");
    expect(steps.charge!.attempt).toBe(1);
    expect(steps.charge!.error).toMatch(/answered 400; not retried/);
    expect(JSON.parse(steps.charge!.output!).status).toBe(400);
    expect(await executionStatus(id)).toBe("FAILED");
  });

  it("400 with clientErrorMode complete becomes the output, and an edge routes on it", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        { id: "charge", type: "GATEWAY", config: { method: "POST", url: `${DEST}/bad`, clientErrorMode: "complete" } },
        { id: "ok", type: "TRANSFORM", config: { output: "= 'ok'" } },
        { id: "rejected", type: "TRANSFORM", config: { output: { reason: "= steps.charge.body.error" } } },
      ],
      edges: [
        { from: "received", to: "charge" },
        { from: "charge", to: "ok", when: "= steps.charge.status < 400" },
        { from: "charge", to: "rejected", when: "= steps.charge.status >= 400" },
      ],
    });
    const id = await h.start(wf, {});
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.charge!.state).toBe("COMPLETED");
    expect(steps.ok!.state).toBe("SKIPPED");
    expect(steps.rejected!.state).toBe("COMPLETED");
    expect(JSON.parse(steps.rejected!.output!)).toEqual({ reason: "invalid amount" });
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("409 with conflictAsProcessed completes the step (a destination's natural unique key)", async () => {
    const externalId = unique("ext");
    const h = harness();
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        {
          id: "create",
          type: "GATEWAY",
          config: { method: "POST", url: `${DEST}/legacy/orders`, body: { external_id: "= payload.id" }, conflictAsProcessed: true },
        },
      ],
      edges: [{ from: "received", to: "create" }],
    });
    const first = await h.start(wf, { id: externalId });
    const second = await h.start(wf, { id: externalId });
    await h.drain();
    expect((await stepsOf(first)).create!.state).toBe("COMPLETED");
    const again = (await stepsOf(second)).create!;
    expect(again.state).toBe("COMPLETED");
    expect(JSON.parse(again.output!).status).toBe(409);
    expect(h.dest.effects).toHaveLength(1);
  });

  it("an invalid key (over 255 characters, or not printable ASCII) fails the step before anything is sent", async () => {
    for (const expr of ["= $pad('k', 300, 'x')", "= 'clé-' & payload.order.id", "= ''"]) {
      const { h, id } = await run({ headers: { "idempotency-key": expr } });
      await h.drain();
      const step = (await stepsOf(id)).charge!;
      expect(step.state).toBe("FAILED");
      expect(step.attempt).toBe(1);
      expect(step.error).toMatch(/invalid Idempotency-Key/);
      expect(step.idempotency_key).toBeNull();
      expect(h.dest.requests).toHaveLength(0);
    }
  });

  it("a URL outside OUTBOUND_ALLOWLIST fails the step, not retried, and nothing is sent", async () => {
    const { h, id } = await run({ url: "https://evil.example.com/steal" });
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step.state).toBe("FAILED");
    expect(step.attempt).toBe(1);
    expect(step.error).toMatch(/not in OUTBOUND_ALLOWLIST/);
    expect(h.dest.requests).toHaveLength(0);
  });

  it("a missing secret fails the step with a clear error, not retried", async () => {
    const { h, id } = await run({ headers: { Authorization: "Bearer {{ secrets.NOT_SET_ANYWHERE }}" } });
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step.state).toBe("FAILED");
    expect(step.attempt).toBe(1);
    expect(step.error).toMatch(/NOT_SET_ANYWHERE .*wrangler secret put NOT_SET_ANYWHERE/);
    expect(h.dest.requests).toHaveLength(0);
  });

  it("a response over maxResponseBytes fails loudly instead of storing a truncated body", async () => {
    const { h, id } = await run({ url: `${DEST}/big`, maxResponseBytes: 1000 });
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step.state).toBe("FAILED");
    expect(step.error).toMatch(/exceeds maxResponseBytes \(1000 bytes\)/);
    expect(step.output).toBeNull();
  });

  it("network errors and timeouts are retried with the same key", async () => {
    let calls = 0;
    const { h, id } = await run({ timeoutMs: 50 }, undefined, {
      fetch: async (input: RequestInfo | URL, init?: RequestInit) => {
        calls++;
        if (calls === 1) throw new TypeError("connection refused");
        if (calls === 2)
          return new Promise<Response>((_, reject) => init?.signal?.addEventListener("abort", () => reject(new Error("aborted"))));
        return new Response(JSON.stringify({ id: "ch_x" }), { status: 201, headers: { "content-type": "application/json" } });
      },
    });
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step.state).toBe("COMPLETED");
    expect(step.attempt).toBe(3);
    const { env } = await import("cloudflare:test");
    const events = await env.DB.prepare("SELECT detail FROM step_events WHERE execution_id = ?1 AND type = 'attempt_failed' ORDER BY id")
      .bind(id)
      .all<{ detail: string }>();
    expect(events.results.map((e) => e.detail)).toEqual([
      expect.stringMatching(/attempt 1: .*network error: connection refused/),
      expect.stringMatching(/attempt 2: .*timed out after 50 ms/),
    ]);
  });
});
