import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { DEST, dumpEveryTable, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const logged: string[] = [];
beforeEach(() => {
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      logged.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
    });
  }
});
afterEach(() => vi.restoreAllMocks());

describe("secrets", () => {
  it("the canary secret never reaches D1, logs, errors or API responses — even when the destination echoes it", async () => {
    const canary = env.PAYMENTS_KEY;
    expect(canary.length).toBeGreaterThan(8);
    const h = harness();
    const wf = await seedWorkflow("dev", {
      id: unique("wf"),
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: {} },
        // The destination echoes every header it got, Authorization included.
        {
          id: "echo",
          type: "GATEWAY",
          config: { method: "POST", url: `${DEST}/echo`, headers: { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" } },
        },
        // Fails and is retried: the request summary is recorded on a failed attempt too.
        {
          id: "flaky",
          type: "GATEWAY",
          config: {
            method: "POST",
            url: `${DEST}/payments/charges`,
            headers: { "Idempotency-Key": "= 'k-' & payload.n", "X-Api-Key": "{{secrets.PAYMENTS_KEY}}" },
            retry: { maxAttempts: 2, backoff: "fixed", initialDelayMs: 10, maxDelayMs: 10 },
          },
        },
        {
          id: "missing",
          type: "GATEWAY",
          config: { method: "POST", url: `${DEST}/echo`, headers: { Authorization: "{{ secrets.NOPE }}" } },
        },
      ],
      edges: [
        { from: "entry", to: "echo" },
        { from: "entry", to: "flaky" },
        { from: "entry", to: "missing" },
      ],
    } as WorkflowDefinitionInput);
    h.dest.fault("/payments/charges", 503, 2);
    const id = await h.start(wf, { n: unique("n") });
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.echo!.state).toBe("COMPLETED");
    expect(steps.flaky!.state).toBe("FAILED");
    expect(steps.missing!.state).toBe("FAILED");
    // The destination did receive the secret (that is the point of it)…
    expect(h.dest.requests.some((r) => r.headers.authorization === `Bearer ${canary}`)).toBe(true);
    expect(h.dest.requests.some((r) => r.headers["x-api-key"] === canary)).toBe(true);
    // …and nothing idemflow keeps or shows contains it.
    expect(JSON.parse(steps.echo!.output!).body.headers.authorization).toBe("Bearer [redacted]");
    const dump = await dumpEveryTable();
    expect(dump).toContain("[redacted]");
    expect(dump).not.toContain(canary);
    // Every attempt is on record (its table is in the dump above), redacted like the step row.
    const attempts = await env.DB.prepare("SELECT vertex_id, request, response FROM step_attempts WHERE execution_id = ?1")
      .bind(id)
      .all<{ vertex_id: string; request: string | null; response: string | null }>();
    const flaky = attempts.results.filter((a) => a.vertex_id === "flaky");
    expect(flaky).toHaveLength(2);
    for (const a of flaky) expect(JSON.parse(a.request!).headers["X-Api-Key"]).toBe("[redacted]");
    const echo = attempts.results.find((a) => a.vertex_id === "echo")!;
    expect(JSON.parse(echo.response!).body.headers.authorization).toBe("Bearer [redacted]");
    const ctx = createExecutionContext();
    const responses = await Promise.all(
      [`/v1/executions/${id}`, `/v1/executions?workflowId=${wf.workflowId}`].map(async (path) => {
        const res = await app.fetch(
          new Request(`http://idemflow.test${path}`, { headers: { authorization: "Bearer dev-token" } }),
          env,
          ctx,
        );
        return res.text();
      }),
    );
    await waitOnExecutionContext(ctx);
    for (const text of responses) {
      expect(text).not.toContain(canary);
    }
    expect(responses[0]).toContain("[redacted]");
    expect(logged.length).toBeGreaterThan(0);
    expect(logged.join("\n")).not.toContain(canary);
  });
});
