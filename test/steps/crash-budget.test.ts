import { beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { CRASH_ALLOWANCE, MAX_OUTPUT_BYTES } from "../../src/steps/run-step";
import { executionStatus, harness, seedWorkflow, stepsOf, unique } from "./helpers";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => {});
  vi.spyOn(console, "warn").mockImplementation(() => {});
});

describe("a step whose worker crashes every time", () => {
  it("is not re-run forever: after its claim budget it is FAILED with a clear error, and the execution FAILED", async () => {
    let runs = 0;
    const h = harness({
      leaseMs: 5_000,
      afterRun: () => {
        runs++;
        throw new Error("deterministic crash");
      },
    });
    const wf = await seedWorkflow("steps-crash-budget", {
      id: unique("wf"),
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: {} },
        { id: "t", type: "TRANSFORM", config: { output: { ok: true } } },
      ],
      edges: [{ from: "entry", to: "t" }],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, {});
    await h.drain(3 * CRASH_ALLOWANCE);
    const t = (await stepsOf(id)).t!;
    expect(t.state).toBe("FAILED");
    expect(t.error).toMatch(/without settling/);
    expect(runs).toBe(1 + CRASH_ALLOWANCE);
    expect(h.queue.pending).toHaveLength(0);
    expect(await executionStatus(id)).toBe("FAILED");
  });
});

describe("a step output over the stored bound", () => {
  it("fails the step loudly instead of handing D1 a row it refuses (a TRANSFORM building a huge string)", async () => {
    const h = harness();
    const wf = await seedWorkflow("steps-crash-budget", {
      id: unique("wf"),
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: {} },
        // Two halves: each string stays under the evaluator's own string bound, the output does not.
        {
          id: "big",
          type: "TRANSFORM",
          config: {
            output: { a: `= $pad('', ${MAX_OUTPUT_BYTES / 2 + 1000}, 'x')`, b: `= $pad('', ${MAX_OUTPUT_BYTES / 2 + 1000}, 'x')` },
          },
        },
      ],
      edges: [{ from: "entry", to: "big" }],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, {});
    await h.drain(5);
    const big = (await stepsOf(id)).big!;
    expect(big.state).toBe("FAILED");
    expect(big.error).toMatch(/over the 1500000-byte bound; it was not stored/);
    expect(big.output).toBeNull();
    expect(await executionStatus(id)).toBe("FAILED");
  });
});

describe("a step whose pinned definition no longer parses", () => {
  it("is settled FAILED with a clear error at its first claim, not crashed and re-run forever", async () => {
    const { env } = await import("cloudflare:test");
    const h = harness();
    const wf = await seedWorkflow("steps-crash-budget", {
      id: unique("wf"),
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: {} },
        { id: "t", type: "TRANSFORM", config: { output: 1 } },
      ],
      edges: [{ from: "entry", to: "t" }],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, {});
    // A definition stored under an older, looser schema: valid JSON the current schema rejects.
    await env.DB.prepare(
      "UPDATE workflow_versions SET definition = json_set(definition, '$.vertices[1].config.unknownField', 1) WHERE workflow_id = ?1",
    )
      .bind(wf.workflowId)
      .run();
    const rounds = await h.drain(3 * CRASH_ALLOWANCE);
    const t = (await stepsOf(id)).t!;
    expect(t.state).toBe("FAILED");
    expect(t.error).toMatch(/pinned workflow version .* can no longer be read/);
    expect(rounds).toBe(1);
    expect(await executionStatus(id)).toBe("FAILED");
  });
});
