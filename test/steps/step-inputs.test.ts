/**
 * What a step loads at its claim, under D1's production limits (SPEC section 11): only the outputs
 * its expressions can reach, measured in SQL before anything is built; over the bound the step
 * fails with a clear error instead of a claim batch D1 refuses on every redelivery.
 *
 * Every statement here runs through the enforcing wrapper (test/helpers/d1-limits.ts): a value or
 * row over 2,000,000 bytes throws, as production D1 would refuse it.
 */
import { env } from "cloudflare:test";
import { beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import type { StoredWorkflow } from "../../src/definitions/store";
import { MAX_STEP_INPUT_BYTES } from "../../src/ledger";
import { executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => {});
  vi.spyOn(console, "warn").mockImplementation(() => {});
});

const BIG = 700_000; // four of these are 2.8 MB together: more than one D1 value or row may hold

/** entry → big1..big4 (each a 700 KB output) → join → done (only when `when` says so). */
function fanOfBigOutputs(id: string, join: unknown, when = "= steps.big2.size = 700000"): WorkflowDefinitionInput {
  const bigs = ["big1", "big2", "big3", "big4"];
  return {
    id,
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: {} },
      ...bigs.map((b) => ({ id: b, type: "TRANSFORM", config: { output: { size: BIG, text: `= $pad('', ${BIG}, 'x')` } } })),
      { id: "join", type: "TRANSFORM", config: { output: join } },
      { id: "done", type: "TRANSFORM", config: { output: { ok: true } } },
    ],
    edges: [
      ...bigs.map((b) => ({ from: "entry", to: b })),
      ...bigs.map((b) => ({ from: b, to: "join" })),
      { from: "join", to: "done", when },
    ],
  } as WorkflowDefinitionInput;
}

/** entry → one TRANSFORM per entry of `outputs` (named by its key), in order. */
function chainOf(id: string, outputs: Record<string, unknown>, entryConfig: Record<string, unknown> = {}): WorkflowDefinitionInput {
  const chain = Object.keys(outputs);
  return {
    id,
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: entryConfig },
      ...chain.map((vertexId) => ({ id: vertexId, type: "TRANSFORM", config: { output: outputs[vertexId] } })),
    ],
    edges: chain.map((to, i) => ({ from: i === 0 ? "entry" : chain[i - 1]!, to })),
  } as WorkflowDefinitionInput;
}

/** Runs one execution of `wf` to its end and returns the step `vertexId`, which must have COMPLETED. */
async function completedStep(h: Harness, wf: StoredWorkflow, payload: unknown, vertexId: string) {
  const id = await h.start(wf, payload);
  await h.drain(10);
  const step = (await stepsOf(id))[vertexId]!;
  expect(step.state).toBe("COMPLETED");
  return step;
}

describe("a step loads only the outputs it can reach", () => {
  it("a join after four 700 KB outputs that reads one of them (and its edge reads another) completes", async () => {
    const h = harness();
    const wf = await seedWorkflow(
      "inputs",
      fanOfBigOutputs(unique("wf"), { first: "= $substring(steps.big1.text, 0, 3)", size: "= steps.big1.size" }),
    );
    const id = await h.start(wf, { order: 1 });
    await h.drain(20);
    const steps = await stepsOf(id);
    expect(steps.join!.state).toBe("COMPLETED");
    expect(JSON.parse(steps.join!.output!)).toEqual({ first: "xxx", size: BIG });
    // The outgoing edge's `when` read steps.big2, which the join's config never names: it was loaded.
    expect(steps.done!.state).toBe("COMPLETED");
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("a `when` sees an output it references even when the step's config reads nothing", async () => {
    const h = harness();
    const wf = await seedWorkflow("inputs", {
      id: unique("wf"),
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: {} },
        { id: "a", type: "TRANSFORM", config: { output: { flag: "= payload.flag" } } },
        { id: "b", type: "TRANSFORM", config: { output: "constant" } },
        { id: "yes", type: "TRANSFORM", config: { output: 1 } },
        { id: "no", type: "TRANSFORM", config: { output: 0 } },
      ],
      edges: [
        { from: "entry", to: "a" },
        { from: "a", to: "b" },
        { from: "b", to: "yes", when: "= steps.a.flag = true and payload.flag = true and steps.entry.flag = true" },
        { from: "b", to: "no", when: "= steps.a.flag != true" },
      ],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, { flag: true });
    await h.drain(10);
    const steps = await stepsOf(id);
    expect(steps.yes!.state).toBe("COMPLETED");
    expect(steps.no!.state).toBe("SKIPPED");
  });

  it("a dynamic reference (`$keys(steps)`): over the bound the step FAILS once with a clear error, and so does the execution", async () => {
    const h = harness();
    const wf = await seedWorkflow("inputs", fanOfBigOutputs(unique("wf"), { names: "= $keys(steps)" }));
    const id = await h.start(wf, {});
    const rounds = await h.drain(50);
    const join = (await stepsOf(id)).join!;
    expect(join.state).toBe("FAILED");
    expect(join.attempt).toBe(1); // the attempt counter moved: no claim rolled back, no loop
    expect(join.error).toMatch(new RegExp(`the step's inputs are \\d+ bytes, over the ${MAX_STEP_INPUT_BYTES}-byte bound`));
    expect(join.error).toMatch(/steps\.big1 \(\d+ bytes\)/);
    expect(join.error).toMatch(/`steps\.\*`/);
    expect(await executionStatus(id)).toBe("FAILED");
    expect(h.queue.pending).toHaveLength(0);
    expect(rounds).toBe(5); // four bigs and the join, each delivered once
  });

  it("`steps.*`, `$lookup(steps, …)` and `$$` are dynamic too; a dynamic read within the bound sees every output", async () => {
    const h = harness();
    const wf = await seedWorkflow(
      "inputs",
      chainOf(unique("wf"), {
        a: { n: 1 },
        b: { n: 2 },
        c: {
          keys: "= $sort($keys(steps))",
          star: "= $sum(steps.*.n)",
          looked: "= $lookup(steps, 'a').n",
          root: "= $$.steps.b.n",
          payload: "= $$.payload.p",
        },
      }),
    );
    const c = await completedStep(h, wf, { p: "P" }, "c");
    expect(JSON.parse(c.output!)).toEqual({ keys: ["a", "b", "entry"], star: 3, looked: 1, root: 2, payload: "P" });
  });
});

describe("a payload near maxPayloadBytes' maximum", () => {
  it("a step reading a ~1 MiB payload beside another step's output completes; the payload is never loaded twice", async () => {
    const h = harness();
    const wf = await seedWorkflow(
      "inputs",
      chainOf(
        unique("wf"),
        {
          half: { text: "= $pad('', 500000, 'y')" },
          t: { payload: "= $length(payload.blob)", entry: "= $length(steps.entry.blob)", half: "= $length(steps.half.text)" },
        },
        { maxPayloadBytes: 1024 * 1024 },
      ),
    );
    const blob = "p".repeat(1024 * 1024 - 100);
    const t = await completedStep(h, wf, { blob }, "t");
    expect(JSON.parse(t.output!)).toEqual({ payload: blob.length, entry: blob.length, half: 500000 });
  });

  it(
    "a step that reads neither the payload nor other outputs loads nothing (a 1 MiB payload and four 700 KB outputs " + "around it)",
    async () => {
      const h = harness();
      const wf = await seedWorkflow("inputs", fanOfBigOutputs(unique("wf"), { constant: true }, "= true"));
      const id = await h.start(wf, { blob: "p".repeat(1024 * 1024 - 100) });
      await h.drain(20);
      expect((await stepsOf(id)).done!.state).toBe("COMPLETED");
    },
  );
});

describe("versions without the analysis", () => {
  it("a version saved before step_inputs existed loads every output, under the same bound", async () => {
    const h = harness();
    const wf = await seedWorkflow("inputs", chainOf(unique("wf"), { a: { n: 1 }, b: "= steps.a.n + $count($keys(payload))" }));
    await env.DB.prepare("UPDATE workflow_versions SET step_inputs = NULL WHERE workflow_id = ?1").bind(wf.workflowId).run();
    const b = await completedStep(h, wf, { x: 1, y: 2 }, "b");
    expect(JSON.parse(b.output!)).toBe(3);
  });
});

describe("queries per Worker invocation", () => {
  it(
    "a queue invocation settling 10 steps of a 50-vertex workflow (each deciding 39 descendants) stays under D1's 1,000 " + "queries",
    async () => {
      const { createExecutionContext, createMessageBatch, waitOnExecutionContext } = await import("cloudflare:test");
      const { handleStepBatch } = await import("../../src/steps/consumer");
      const { limitedD1 } = await import("../helpers/d1-limits");
      const { MAX_VERTICES } = await import("../../src/definitions/vertex-rules");
      const fan = Array.from({ length: 10 }, (_, i) => `a${i}`);
      const chain = Array.from({ length: MAX_VERTICES - 12 }, (_, i) => `c${i}`);
      const wf = await seedWorkflow("inputs", {
        id: unique("wf"),
        vertices: [
          { id: "entry", type: "ENTRY_POINT", config: {} },
          ...[...fan, "join", ...chain].map((id) => ({ id, type: "TRANSFORM", config: { output: { id } } })),
        ],
        edges: [
          ...fan.map((a) => ({ from: "entry", to: a })),
          ...fan.map((a) => ({ from: a, to: "join" })),
          { from: "join", to: chain[0]! },
          ...chain.slice(1).map((c, i) => ({ from: chain[i]!, to: c })),
        ],
      } as WorkflowDefinitionInput);
      expect(1 + fan.length + 1 + chain.length).toBe(MAX_VERTICES);
      const h = harness();
      const id = await h.start(wf, {});
      const messages = h.queue.take();
      expect(messages).toHaveLength(10);
      const invocation = { queries: 0 };
      const db = limitedD1(env.DB, invocation); // throws past 1,000 queries
      const batch = createMessageBatch<unknown>(
        "idemflow-steps",
        messages.map((m, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body: m.body })),
      );
      const ctx = createExecutionContext();
      await handleStepBatch(batch, { ...env, DB: db }, ctx, { ...h.rt, db, reapEveryMs: 0 });
      await waitOnExecutionContext(ctx);
      const steps = await stepsOf(id);
      expect(fan.every((a) => steps[a]!.state === "COMPLETED")).toBe(true);
      expect(steps.join!.state).toBe("DISPATCHED");
      // 10 × (claim batch 4 + settle batch 2 + 39 decisions + finish 1) + the opportunistic reaper.
      expect(invocation.queries).toBeGreaterThan(10 * 45);
      expect(invocation.queries).toBeLessThan(1_000);
    },
  );
});

describe("payloads through the Worker (SELF.fetch, under the enforcing wrapper)", () => {
  it(
    "a ~1 MiB payload is accepted and runs; a version saved with maxPayloadBytes above 1 MiB is clamped to it (413, nothing " + "written)",
    async () => {
      const { SELF } = await import("cloudflare:test");
      const { BASE, jsonRequest, seedWorkflow: seedLatest, transformWorkflow } = await import("../ingress/helpers");
      const trigger = (workflowId: string, body: unknown) =>
        SELF.fetch(jsonRequest(`${BASE}/v1/workflows/${workflowId}/trigger`, body, { token: "dev-token" }));
      const near = unique("near-max");
      await seedLatest("dev", transformWorkflow(near, { maxPayloadBytes: 1024 * 1024 }));
      const ok = await trigger(near, { blob: "n".repeat(1024 * 1024 - 100) });
      expect(ok.status).toBe(202);
      // An older version, saved before the limit was bounded by D1 (zod still parses it; validation refuses it now).
      const old = unique("old-limit");
      await seedLatest("dev", transformWorkflow(old, { maxPayloadBytes: 5 * 1024 * 1024 }));
      const big = await trigger(old, { blob: "o".repeat(1_500_000) });
      expect(big.status).toBe(413);
      expect((await big.json<{ code: string }>()).code).toBe("payload-too-large");
      const rows = await env.DB.prepare("SELECT count(*) AS n FROM executions WHERE workflow_id = ?1").bind(old).first<{ n: number }>();
      expect(rows?.n).toBe(0);
    },
  );
});
