/**
 * A stored version whose key declares a retention no date can end (issue 26, finding 8):
 * `Number.MAX_SAFE_INTEGER` ms ("never forget") was accepted before durations were bounded, and
 * its trace answered 500 (`new Date(firstSent + retention).toISOString()` throws a RangeError).
 * Saved versions are immutable and never validated again, so it is stored here with the schema's
 * parse only (`seedWorkflow`); its trace must answer 200 with the deadline it cannot show as null.
 */
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { callApp, DEST, executionStatus, harness, seedWorkflow, unique } from "./helpers";

const WS = "dev"; // dev-token's workspace: the trace route is called with it

const workflow = (retention: number | string): WorkflowDefinitionInput =>
  ({
    id: unique("forever"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "pay",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}/echo`,
          body: { amount: "= payload.total" },
          idempotencyKey: { value: "= $idempotencyKey('pay', payload.id)", header: "X-Key", retention },
        },
      },
    ],
    edges: [{ from: "received", to: "pay" }],
  }) as WorkflowDefinitionInput;

interface KeyTrace {
  value: string;
  retentionMs: number;
  firstSentAt: string | null;
  retentionDeadline: string | null;
}

describe("the trace of a version with a retention past any date", () => {
  it.each([Number.MAX_SAFE_INTEGER, "99999999999d"])("retention %s: 200, the key sent, the deadline null", async (retention) => {
    const h = harness();
    const wf = await seedWorkflow(WS, workflow(retention));
    const id = await h.start(wf, { id: unique("O"), total: 3 });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");

    const response = await callApp(h, "GET", `/v1/executions/${id}`);
    expect(response.status).toBe(200);
    const trace = await response.json<{ steps: Array<{ vertexId: string; destinationKey: KeyTrace | null }> }>();
    const key = trace.steps.find((s) => s.vertexId === "pay")!.destinationKey!;
    expect(key.value).toBe(h.dest.requests[0]!.headers["x-key"]);
    expect(key.firstSentAt).toBe(new Date(h.clock.now()).toISOString());
    expect(key.retentionDeadline).toBeNull();
    expect(key.retentionMs).toBeGreaterThan(8.64e15);
  });
});
