/**
 * A TRANSFORM completed in its predecessor's settle (src/steps/inline-transform.ts,
 * src/ledger/step-settle.ts `decideStep`), against the real D1 and the real demo destination:
 * inserted COMPLETED with its attempt on its row by the batch that settles its predecessor, under
 * that settle's fence — never by a stale worker, never twice, never for an execution that failed
 * — and run the usual way whenever it cannot be (it fails, it reads what the invocation does not hold).
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { claimAndLoad, readExecutionChanges, settleAndDispatch } from "../../src/ledger";
import { descendantsInOrder } from "../../src/steps/graph";
import { readTrace } from "../../src/steps/trace";
import { countingD1 } from "../helpers/counting-d1";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, takenOverCharge, unique } from "./helpers";

const WS = "steps-chaining"; // granted the charge's Worker secret (vitest.config.ts)

const settleCharge = (id: string, wf: { definition: Parameters<typeof descendantsInOrder>[0] }, epoch: number, now: number) =>
  settleAndDispatch(env.DB, {
    fence: { executionId: id, vertexId: "charge", epoch },
    now,
    outcome: { state: "COMPLETED", output: '{"body":{"id":"ch_9"}}', nextVertices: ["done"] },
    request: null,
    backfill: [],
    descendants: descendantsInOrder(wf.definition, "charge"),
    chain: null,
    inline: { vertexId: "done", output: '{"charged":"ch_9"}', nextVertices: [] },
  });

describe("a TRANSFORM completed in its predecessor's settle", () => {
  it("entry → charge → done: done inserted COMPLETED by the charge's settle, 2 round trips, its attempt after the charge's", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db }, { chain: true });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    counting.reset();
    const id = await h.start(wf, { order: { id: unique("O"), total: 42 } });
    expect(counting.roundTrips()).toBe(2);
    expect(await executionStatus(id)).toBe("COMPLETED");
    const steps = await stepsOf(id);
    expect(steps.done).toMatchObject({ state: "COMPLETED", epoch: 1, attempt: 1 });
    expect(JSON.parse(steps.done!.output!)).toEqual({ charged: "ch_1" });
    expect(h.queue.sends).toBe(0);
    // Every attempt still on record and in the change stream: the charge's, then done's.
    const trace = await readTrace(env.DB, WS, id);
    const done = trace!.steps.find((s) => s.vertexId === "done")!;
    expect(done.attempts).toMatchObject([{ epoch: 1, attempt: 1, outcome: "completed" }]);
    expect(done.attempts[0]!.startedAt).toBe(done.attempts[0]!.finishedAt);
    const changes = await readExecutionChanges(env.DB, WS, id, [0, 0], 100);
    expect(changes.changes.filter((c) => c.kind === "attempt").map((c) => (c as { vertexId: string }).vertexId)).toEqual([
      "charge",
      "done",
    ]);
    // No attempt row for either: both completed, both on their step rows.
    const rows = await env.DB.prepare("SELECT count(*) AS n FROM step_attempt_rows WHERE execution_id = ?1")
      .bind(id)
      .first<{ n: number }>();
    expect(rows!.n).toBe(0);
  });

  it("a stale worker's settle inserts nothing; the current one inserts it once, and a replay of it nothing more", async () => {
    const h = harness();
    const { wf, id } = await takenOverCharge(h, WS);
    // The stale worker first: fenced out, done is not decided at all.
    expect(await settleCharge(id, wf, 1, h.clock.now())).toMatchObject({ settled: false, inlined: false, dispatched: [] });
    expect((await stepsOf(id)).done).toBeUndefined();
    // The current one: done COMPLETED in its batch, the execution finished by it.
    expect(await settleCharge(id, wf, 2, h.clock.now())).toMatchObject({ settled: true, inlined: true, executionStatus: "COMPLETED" });
    const done = (await stepsOf(id)).done!;
    expect(done).toMatchObject({ state: "COMPLETED", epoch: 1, attempt: 1 });
    // Replayed, and the stale one again: done is on record, nothing changes.
    expect(await settleCharge(id, wf, 2, h.clock.now())).toMatchObject({ inlined: false, dispatched: [] });
    expect(await settleCharge(id, wf, 1, h.clock.now())).toMatchObject({ settled: false, inlined: false });
    expect((await stepsOf(id)).done).toEqual(done);
    const attempts = await env.DB.prepare(
      "SELECT vertex_id, outcome FROM step_attempts WHERE execution_id = ?1 AND outcome = 'completed' ORDER BY seq",
    )
      .bind(id)
      .all<{ vertex_id: string; outcome: string }>();
    expect(attempts.results.map((a) => a.vertex_id)).toEqual(["charge", "done"]);
  });

  it("not in an execution with a FAILED step: decided DISPATCHED as any successor, and run", async () => {
    const h = harness();
    const definition = {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        { id: "a", type: "TRANSFORM", config: { output: { n: 1 } } },
        { id: "b", type: "TRANSFORM", config: { output: { n: 2 } } },
        { id: "after", type: "TRANSFORM", config: { output: { n: "= steps.a.n" } } },
      ],
      edges: [
        { from: "received", to: "a" },
        { from: "received", to: "b" },
        { from: "a", to: "after" },
      ],
    } as WorkflowDefinitionInput;
    const wf = await seedWorkflow(WS, definition);
    const id = await h.start(wf, { x: 1 });
    h.queue.take();
    const now = h.clock.now();
    const a = (await claimAndLoad(env.DB, { executionId: id, vertexId: "a" }, now, 30_000)).claimed!;
    const b = (await claimAndLoad(env.DB, { executionId: id, vertexId: "b" }, now, 30_000)).claimed!;
    await settleAndDispatch(env.DB, {
      fence: { executionId: id, vertexId: "b", epoch: b.epoch },
      now,
      outcome: { state: "FAILED", error: "b failed", output: null },
      request: null,
      backfill: [],
      descendants: [],
    });
    const result = await settleAndDispatch(env.DB, {
      fence: { executionId: id, vertexId: "a", epoch: a.epoch },
      now,
      outcome: { state: "COMPLETED", output: '{"n":1}', nextVertices: ["after"] },
      request: null,
      backfill: [],
      descendants: descendantsInOrder(wf.definition, "a"),
      inline: { vertexId: "after", output: '{"n":1}', nextVertices: [] },
    });
    expect(result).toMatchObject({ settled: true, inlined: false, dispatched: ["after"] });
    expect((await stepsOf(id)).after).toMatchObject({ state: "DISPATCHED", epoch: 0, output: null });
  });

  it("a transform that fails is run the usual way and fails there, with its attempt on record", async () => {
    const h = harness({}, { chain: true });
    const workflow = chargeWorkflow(unique("wf"));
    workflow.vertices[2] = { id: "done", type: "TRANSFORM", config: { output: { n: "= steps.charge.body.id + 1" } } };
    const wf = await seedWorkflow(WS, workflow);
    const id = await h.start(wf, { order: { id: unique("O"), total: 5 } });
    await h.drain();
    expect(await executionStatus(id)).toBe("FAILED");
    const steps = await stepsOf(id);
    expect(steps.done).toMatchObject({ state: "FAILED", epoch: 1, attempt: 1 });
    const attempts = await env.DB.prepare("SELECT outcome, error FROM step_attempt_rows WHERE execution_id = ?1 AND vertex_id = 'done'")
      .bind(id)
      .all<{ outcome: string; error: string }>();
    expect(attempts.results).toMatchObject([{ outcome: "failed" }]);
    expect(attempts.results[0]!.error).toMatch(/transform done/);
  });

  it("a chain of transforms a → b → c: b completes in a's settle, c is claimed by it: 3 round trips where there were 4", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db }, { chain: true });
    const definition = {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        { id: "a", type: "TRANSFORM", config: { output: { n: "= payload.n + 1" } } },
        { id: "b", type: "TRANSFORM", config: { output: { n: "= steps.a.n * 2" } } },
        { id: "c", type: "TRANSFORM", config: { output: { n: "= steps.b.n + 1" } } },
      ],
      edges: [
        { from: "received", to: "a" },
        { from: "a", to: "b" },
        { from: "b", to: "c" },
      ],
    } as WorkflowDefinitionInput;
    const wf = await seedWorkflow(WS, definition);
    counting.reset();
    const id = await h.start(wf, { n: 1 });
    expect(counting.roundTrips()).toBe(3);
    expect(await executionStatus(id)).toBe("COMPLETED");
    const steps = await stepsOf(id);
    expect(JSON.parse(steps.c!.output!)).toEqual({ n: 5 });
    expect(Object.values(steps).every((s) => s.state === "COMPLETED")).toBe(true);
    const trace = await readTrace(env.DB, WS, id);
    for (const v of ["a", "b", "c"]) {
      expect(trace!.steps.find((s) => s.vertexId === v)!.attempts).toMatchObject([{ attempt: 1, outcome: "completed" }]);
    }
  });
});
