import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { stepEvents } from "../../src/ingress/watch";
import { BASE, countRows, jsonRequest, seedWorkflow, transformWorkflow, unique } from "./helpers";

function parseEvents(text: string): Array<{ event: string; data: Record<string, unknown> }> {
  return text
    .split("\n\n")
    .filter((block) => block.trim().length > 0)
    .map((block) => {
      const lines = block.split("\n");
      const event = lines.find((l) => l.startsWith("event: "))!.slice(7);
      const data = JSON.parse(lines.find((l) => l.startsWith("data: "))!.slice(6)) as Record<string, unknown>;
      return { event, data };
    });
}

const stream = (workflowId: string, body: unknown, query = "") =>
  SELF.fetch(jsonRequest(`${BASE}/v1/workflows/${workflowId}/stream${query}`, body, { token: "dev-token" }));

describe("POST /v1/workflows/:id/stream", () => {
  it("streams execution and step events until the execution finishes", async () => {
    const id = unique("stream");
    await seedWorkflow("dev", transformWorkflow(id));
    const res = await stream(id, { a: 1 });
    expect(res.status).toBe(202);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = parseEvents(await res.text());
    const names = events.map((e) => e.event);
    expect(names[0]).toBe("execution.started");
    expect(events[0]!.data).toMatchObject({ identity: "forced", deduplicated: false, status: "RUNNING" });
    expect(names.at(-1)).toBe("execution.finished");
    expect(events.at(-1)!.data).toMatchObject({ status: "COMPLETED" });
    const shape = events.filter((e) => e.data.vertexId === "shape").map((e) => [e.event, e.data.attempt, e.data.epoch]);
    expect(shape).toEqual([
      ["step.started", 1, 1],
      ["step.completed", 1, 1],
    ]);
    expect(events.find((e) => e.data.vertexId === "received")?.event).toBe("step.completed");
  });

  it("streams a run whose successors are all skipped and ends at once", async () => {
    const id = unique("streamskip");
    await seedWorkflow("dev", transformWorkflow(id, {}, { edges: [{ from: "received", to: "shape", when: "= false" }] }));
    const events = parseEvents(await (await stream(id, {})).text());
    expect(events.map((e) => e.event)).toEqual(["execution.started", "step.completed", "step.skipped", "execution.finished"]);
  });

  it("starts a new execution for every stream run unless forceNewExecution=false", async () => {
    const id = unique("streamforce");
    await seedWorkflow("dev", transformWorkflow(id, {}, { edges: [{ from: "received", to: "shape", when: "= false" }] }));
    const started = async (query: string) => parseEvents(await (await stream(id, { same: 1 }, query)).text())[0]!.data;
    const [a, b] = [await started(""), await started("")];
    expect(a.executionId).not.toBe(b.executionId);
    const [c, d] = [await started("?forceNewExecution=false"), await started("?forceNewExecution=false")];
    expect(d.executionId).toBe(c.executionId);
    expect(d.deduplicated).toBe(true);
  });

  it("dedupes stream runs only against stream runs: never against a test run or a production trigger with the same body", async () => {
    const id = unique("streamscope");
    await seedWorkflow("dev", transformWorkflow(id, {}, { edges: [{ from: "received", to: "shape", when: "= false" }] }));
    const body = { scope: "mine" };
    const testRun = await SELF.fetch(
      jsonRequest(`${BASE}/v1/workflows/${id}/test-runs?forceNewExecution=false`, body, { token: "dev-token" }),
    );
    expect(testRun.status).toBe(202);
    const testRunId = (await testRun.json<{ executionId: string }>()).executionId;
    const production = await SELF.fetch(jsonRequest(`${BASE}/v1/workflows/${id}/trigger`, body, { token: "dev-token" }));
    expect(production.status).toBe(202);
    const productionId = (await production.json<{ executionId: string }>()).executionId;

    const first = parseEvents(await (await stream(id, body, "?forceNewExecution=false")).text())[0]!.data;
    expect(first).toMatchObject({ identity: "content", deduplicated: false });
    expect([testRunId, productionId]).not.toContain(first.executionId);
    const second = parseEvents(await (await stream(id, body, "?forceNewExecution=false")).text())[0]!.data;
    expect(second).toMatchObject({ executionId: first.executionId, deduplicated: true });
    // And the other way round: a later test run still finds its own execution, not the stream's.
    const again = await SELF.fetch(
      jsonRequest(`${BASE}/v1/workflows/${id}/test-runs?forceNewExecution=false`, body, { token: "dev-token" }),
    );
    expect(again.status).toBe(200);
    expect((await again.json<{ executionId: string }>()).executionId).toBe(testRunId);
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id)).toBe(3);
  });

  it("keeps the execution running when the client disconnects", async () => {
    const id = unique("streamgone");
    await seedWorkflow("dev", transformWorkflow(id));
    const controller = new AbortController();
    const res = await SELF.fetch(jsonRequest(`${BASE}/v1/workflows/${id}/stream`, { a: 1 }, { token: "dev-token" }), {
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const executionId = parseEvents(first)[0]!.data.executionId as string;
    controller.abort();
    await reader.cancel().catch(() => undefined);
    // The step still runs to completion on the queue.
    let status = "RUNNING";
    for (let i = 0; i < 50 && status === "RUNNING"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const trace = await SELF.fetch(`${BASE}/v1/executions/${executionId}`, { headers: { authorization: "Bearer dev-token" } });
      status = (await trace.json<{ status: string }>()).status;
    }
    expect(status).toBe("COMPLETED");
  });
});

describe("stepEvents", () => {
  const step = (state: string, epoch: number, attempt = epoch) => ({
    vertexId: "v",
    state: state as never,
    epoch,
    attempt,
    output: null,
    error: null,
    updatedAt: 0,
  });

  it("reports a claim that polling only saw settled, before its completion", () => {
    expect(stepEvents(new Map([["v", step("DISPATCHED", 0)]]), [step("COMPLETED", 1)]).map((e) => e.event)).toEqual([
      "step.started",
      "step.completed",
    ]);
  });

  it("reports a failed attempt waiting for its retry, and the next claim", () => {
    const before = new Map([["v", step("EXECUTING", 1)]]);
    expect(stepEvents(before, [step("DISPATCHED", 1)]).map((e) => [e.event, e.data.retrying])).toEqual([["step.failed", true]]);
    expect(stepEvents(new Map([["v", step("DISPATCHED", 1)]]), [step("EXECUTING", 2)]).map((e) => [e.event, e.data.epoch])).toEqual([
      ["step.started", 2],
    ]);
  });

  it("reports nothing when nothing changed", () => {
    expect(stepEvents(new Map([["v", step("EXECUTING", 1)]]), [step("EXECUTING", 1)])).toEqual([]);
  });
});
