import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { callApp, chargeWorkflow, executionStatus, failedCharge, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "dev"; // dev-token's workspace

describe("operator retry", () => {
  it("re-runs a FAILED step with its persisted key; the attempt count continues", async () => {
    const h = harness();
    const { id } = await failedCharge(h, WS);
    const res = await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key: unique("op") });
    expect(res.status).toBe(202);
    expect(await executionStatus(id)).toBe("RUNNING");
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.charge!.state).toBe("COMPLETED");
    expect(steps.charge!.attempt).toBe(4);
    const keys = h.dest.keysSent("/payments/charges");
    expect(keys).toHaveLength(4);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toBe(steps.charge!.idempotency_key);
    expect(steps.done!.state).toBe("COMPLETED");
    expect(await executionStatus(id)).toBe("COMPLETED");
    const trace = (await (await callApp(h, "GET", `/v1/executions/${id}`)).json()) as {
      steps: Array<{ vertexId: string; events: Array<{ type: string }> }>;
    };
    expect(trace.steps.find((s) => s.vertexId === "charge")!.events.map((e) => e.type)).toEqual([
      "attempt_failed",
      "attempt_failed",
      "operator_retry",
    ]);
  });

  it("gives the retried step its full retry budget again: it is retried maxAttempts times before it fails", async () => {
    const h = harness();
    const { id } = await failedCharge(h, WS); // maxAttempts 3, all three spent
    expect((await stepsOf(id)).charge!.attempt).toBe(3);
    expect((await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key: unique("op") })).status).toBe(202);
    // Two more failures: within a fresh budget of three the third attempt after the retry succeeds.
    h.dest.fault("/payments/charges", 500, 2);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect((await stepsOf(id)).charge).toMatchObject({ state: "COMPLETED", attempt: 6 });
    expect(h.dest.keysSent("/payments/charges")).toHaveLength(6);

    // And a budget spent again fails after exactly three attempts more.
    const again = await failedCharge(h, WS);
    await callApp(h, "POST", `/v1/executions/${again.id}/steps/charge/retry`, { key: unique("op") });
    h.dest.fault("/payments/charges", 500, 3);
    await h.drain();
    expect((await stepsOf(again.id)).charge).toMatchObject({ state: "FAILED", attempt: 6 });
  });

  it("requires an Idempotency-Key, and a repeated request with the same key retries once", async () => {
    const h = harness();
    const { id } = await failedCharge(h, WS);
    const missing = await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`);
    expect(missing.status).toBe(400);
    expect((await stepsOf(id)).charge!.state).toBe("FAILED");
    const key = unique("op");
    const [a, b] = [
      await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key }),
      await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key }),
    ];
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    expect(b.headers.get("idempotent-replayed")).toBe("true");
    expect(h.queue.pending).toHaveLength(1);
  });

  it("answers 409 for a step that is not FAILED and 404 for another workspace's execution", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 1 } });
    await h.drain();
    const notFailed = await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key: unique("op") });
    expect(notFailed.status).toBe(409);
    expect(((await notFailed.json()) as { code: string }).code).toBe("step-not-failed");
    // The entry has no row (migrations/0045): its retry is refused the same way, as the COMPLETED step it is.
    const entry = await callApp(h, "POST", `/v1/executions/${id}/steps/received/retry`, { key: unique("op") });
    expect(entry.status).toBe(409);
    const problem = (await entry.json()) as { code: string; detail: string };
    expect(problem.code).toBe("step-not-failed");
    expect(problem.detail).toContain("Step received is COMPLETED");
    const other = await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key: unique("op"), token: "other-token" });
    expect(other.status).toBe(404);
    expect((await callApp(h, "GET", `/v1/executions/${id}`, { token: "other-token" })).status).toBe(404);
    expect((await callApp(h, "POST", `/v1/executions/${id}/start-over`, { key: unique("op"), token: "other-token" })).status).toBe(404);
  });

  it("refuses another workspace's retry of a FAILED step (404 problem+json): it stays FAILED, the Gateway is not called", async () => {
    const h = harness();
    const { id } = await failedCharge(h, WS);
    const calls = h.dest.requests.length;
    const before = await stepsOf(id);
    const res = await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key: unique("op"), token: "other-token" });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(await res.json()).toMatchObject({ status: 404, code: "not-found" });
    // Deliver anything that was queued: nothing may reach the destination.
    expect(h.queue.pending).toEqual([]);
    await h.drain();
    expect(h.dest.requests).toHaveLength(calls);
    expect(await stepsOf(id)).toEqual(before);
    expect(await executionStatus(id)).toBe("FAILED");
    const retries = await env.DB.prepare("SELECT count(*) AS n FROM step_events WHERE execution_id = ?1 AND type = 'operator_retry'")
      .bind(id)
      .first<{ n: number }>();
    expect(retries?.n).toBe(0);
    // The step was retryable: its own workspace may (so the 404 was the workspace, not the state).
    expect((await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key: unique("op") })).status).toBe(202);
  });
});

describe("start over", () => {
  it("creates a new linked execution whose Gateway keys equal the old ones, so the destination charges once", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 77 } });
    await h.drain();
    const res = await callApp(h, "POST", `/v1/executions/${id}/start-over`, { key: unique("op") });
    expect(res.status).toBe(202);
    const body = (await res.json()) as { executionId: string; startedOverFrom: string; identity: string };
    expect(body.executionId).not.toBe(id);
    expect(body.startedOverFrom).toBe(id);
    await h.drain();
    const [before, after] = [await stepsOf(id), await stepsOf(body.executionId)];
    expect(after.charge!.idempotency_key).toBe(before.charge!.idempotency_key);
    expect(after.charge!.state).toBe("COMPLETED");
    expect(h.dest.effects).toHaveLength(1);
    const trace = (await (await callApp(h, "GET", `/v1/executions/${body.executionId}`)).json()) as {
      startedOverFrom: string;
      trigger: string;
    };
    expect(trace.startedOverFrom).toBe(id);
    expect(trace.trigger).toBe("start_over");
  });
  it(
    "refuses to start over on a stored payload holding a number a float cannot carry (stored before the rule), naming its " + "pointer",
    async () => {
      const h = harness();
      const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
      const id = await h.start(wf, { order: { id: unique("O"), total: 5 } });
      await h.drain();
      // What a pre-rule trigger of {"order":{"id":12345678901234567891}} left behind: the rounded id.
      await env.DB.prepare("UPDATE executions SET payload = ? WHERE id = ?")
        .bind('{"order":{"id":12345678901234567000,"total":5}}', id)
        .run();
      const before = await env.DB.prepare("SELECT count(*) AS n FROM executions").first<{ n: number }>();
      const res = await callApp(h, "POST", `/v1/executions/${id}/start-over`, { key: unique("op") });
      expect(res.status).toBe(422);
      expect(await res.json()).toMatchObject({ code: "json-number-out-of-range", pointer: "/order/id", number: "12345678901234567000" });
      expect(await env.DB.prepare("SELECT count(*) AS n FROM executions").first<{ n: number }>()).toEqual(before);
    },
  );
});

describe("reading executions", () => {
  it("the trace shows every step with state, attempts, epoch, key, redacted request and output", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: "T-1", total: 5 } });
    await h.drain();
    const res = await callApp(h, "GET", `/v1/executions/${id}`);
    expect(res.status).toBe(200);
    const trace = (await res.json()) as Record<string, unknown> & { steps: Array<Record<string, unknown>> };
    expect(trace).toMatchObject({
      executionId: id,
      workflowId: wf.workflowId,
      version: wf.version,
      status: "COMPLETED",
      startedOverFrom: null,
    });
    expect(trace.steps.map((s) => s.vertexId)).toEqual(["received", "charge", "done"]);
    const charge = trace.steps[1]!;
    expect(charge).toMatchObject({ state: "COMPLETED", attempt: 1, epoch: 1, events: [] });
    expect(charge.idempotencyKey).toMatch(/^charge-/);
    expect((charge.request as { headers: Record<string, string> }).headers.Authorization).toBe("Bearer [redacted]");
    expect((charge.output as { status: number; idempotencyKey: string }).status).toBe(201);
    expect((await callApp(h, "GET", `/v1/executions/nope`)).status).toBe(404);
  });

  it("lists executions newest first with filters and a cursor", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    for (let i = 0; i < 3; i++) await h.start(wf, { order: { id: unique("L"), total: i } });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await callApp(
        h,
        "GET",
        `/v1/executions?workflowId=${wf.workflowId}&status=RUNNING&limit=2${cursor ? `&cursor=${cursor}` : ""}`,
      );
      expect(res.status).toBe(200);
      const page = (await res.json()) as { items: Array<{ executionId: string; status: string }>; nextCursor: string | null };
      for (const item of page.items) {
        expect(item.status).toBe("RUNNING");
        seen.push(item.executionId);
      }
      cursor = page.nextCursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(3);
    expect((await callApp(h, "GET", `/v1/executions?status=BOGUS`)).status).toBe(400);
    expect((await callApp(h, "GET", `/v1/executions?cursor=%%%`)).status).toBe(400);
    const other = (await (await callApp(h, "GET", `/v1/executions?workflowId=${wf.workflowId}`, { token: "other-token" })).json()) as {
      items: unknown[];
    };
    expect(other.items).toEqual([]);
  });
});
