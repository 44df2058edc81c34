/**
 * What the read routes cost in bytes read from D1 (issue 26, finding 4): the list reads each
 * execution's summary, never its payload; the trace reads a step's output (or request) only up to
 * `TRACE_VALUE_MAX_BYTES`, and shows a larger one as omitted, with its size. Counted with the
 * counting wrapper's `bytesRead` (every value of every row D1 returned) over the whole route.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { TRACE_VALUE_MAX_BYTES } from "../../src/ledger";
import { countingD1 } from "../helpers/counting-d1";
import { harness, seedWorkflow, unique } from "../steps/helpers";

/** One GET of the API in workspace `dev`, its D1 through the counting wrapper. */
async function get(path: string) {
  const counting = countingD1(env.DB);
  const ctx = createExecutionContext();
  const response = await app.fetch(
    new Request(`http://idemflow.test${path}`, { headers: { authorization: "Bearer dev-token" } }),
    { ...env, DB: counting.db },
    ctx,
  );
  const text = await response.text();
  await waitOnExecutionContext(ctx);
  return { response, text, bytesRead: counting.bytesRead() };
}

/** entry → shape, a TRANSFORM whose output is the whole payload (so the payload is stored three times). */
const echoWorkflow = (id: string): WorkflowDefinitionInput => ({
  id,
  vertices: [
    { id: "received", type: "ENTRY_POINT", config: {} },
    { id: "shape", type: "TRANSFORM", config: { output: { seen: "= payload" } } },
  ],
  edges: [{ from: "received", to: "shape" }],
});

describe("bytes read per list page and per trace", () => {
  it("a list page of 100 executions with 100 KB payloads reads their summaries only: under 1 KiB per item", async () => {
    const h = harness();
    const wf = await seedWorkflow("dev", echoWorkflow(unique("bytes-list")));
    const payload = { blob: "x".repeat(100_000) };
    for (let i = 0; i < 100; i++) await h.start(wf, payload);
    const page = await get(`/v1/executions?workflowId=${wf.workflowId}&limit=100`);
    expect(page.response.status).toBe(200);
    const items = (JSON.parse(page.text) as { items: unknown[] }).items;
    expect(items).toHaveLength(100);
    console.log(`list page of 100: ${page.bytesRead} bytes read for a ${page.text.length}-byte answer`);
    // The budget: 1 KiB per item (the summary's columns), the token's lookup included.
    expect(page.bytesRead).toBeLessThan(100 * 1024);
  });

  it("a trace with 1 MB payload and outputs reads at most TRACE_VALUE_MAX_BYTES per value and shows the rest as omitted", async () => {
    const h = harness();
    const wf = await seedWorkflow("dev", echoWorkflow(unique("bytes-trace")));
    const payload = { blob: "y".repeat(1_000_000) };
    const id = await h.start(wf, payload);
    await h.drain();
    const trace = await get(`/v1/executions/${id}`);
    expect(trace.response.status).toBe(200);
    console.log(`trace of 1 MB payload, 2 outputs of 1 MB: ${trace.bytesRead} bytes read for a ${trace.text.length}-byte answer`);
    // The budget: two steps, each at most one bounded value, plus the rows' small columns and the definition.
    expect(trace.bytesRead).toBeLessThan(2 * TRACE_VALUE_MAX_BYTES + 32 * 1024);
    const body = JSON.parse(trace.text) as { status: string; steps: Array<{ vertexId: string; output: unknown; outputOmitted: unknown }> };
    expect(body.status).toBe("COMPLETED");
    const stored = JSON.stringify(payload).length;
    expect(body.steps.map((s) => [s.vertexId, s.output, s.outputOmitted])).toEqual([
      ["received", null, { bytes: stored, limit: TRACE_VALUE_MAX_BYTES }],
      ["shape", null, { bytes: JSON.stringify({ seen: payload }).length, limit: TRACE_VALUE_MAX_BYTES }],
    ]);
    // A small output is shown as before.
    const small = await h.start(wf, { a: 1 });
    await h.drain();
    const smallTrace = JSON.parse((await get(`/v1/executions/${small}`)).text) as typeof body;
    expect(smallTrace.steps.map((s) => [s.vertexId, s.output, s.outputOmitted])).toEqual([
      ["received", { a: 1 }, null],
      ["shape", { seen: { a: 1 } }, null],
    ]);
  });
});
