import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { DEST, executionStatus, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-graph";
const call = (id: string) => ({ id, type: "GATEWAY", config: { method: "POST", url: `${DEST}/echo` } }) as const;
const entry = { id: "entry", type: "ENTRY_POINT", config: {} } as const;
/** entry → a, b → join: two parallel Gateway branches and a join that reads both. */
const diamond = (): WorkflowDefinitionInput =>
  ({
    id: unique("wf"),
    vertices: [entry, call("a"), call("b"), { id: "join", type: "TRANSFORM", config: { output: "= [steps.a.status, steps.b.status]" } }],
    edges: [
      { from: "entry", to: "a" },
      { from: "entry", to: "b" },
      { from: "a", to: "join" },
      { from: "b", to: "join" },
    ],
  }) as WorkflowDefinitionInput;

describe("fan-out and fan-in", () => {
  it("two branches settling concurrently create the join exactly once, DISPATCHED, with one message", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, diamond());
    const id = await h.start(wf, {});
    const first = h.queue.take();
    expect(first.map((m) => m.body.vertexId).sort()).toEqual(["a", "b"]);
    // Both workers claim and read (neither sees the other settled), then both settle at once.
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    const running = Promise.all(first.map((m) => h.deliver([m.body])));
    while (h.dest.requests.length < 2) await new Promise((r) => setTimeout(r, 5));
    release();
    await running;
    const joinMessages = h.queue.pending.filter((m) => m.body.vertexId === "join");
    expect(joinMessages).toHaveLength(1);
    expect((await stepsOf(id)).join!.state).toBe("DISPATCHED");
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.join!.state).toBe("COMPLETED");
    expect(JSON.parse(steps.join!.output!)).toEqual([200, 200]);
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it(
    "a join waits for every branch: nothing is dispatched while only one has settled, and exactly one message once " + "both have",
    async () => {
      const h = harness();
      const wf = await seedWorkflow(WS, diamond());
      const id = await h.start(wf, {});
      const branches = h.queue.take();
      const a = branches.find((m) => m.body.vertexId === "a")!;
      const b = branches.find((m) => m.body.vertexId === "b")!;
      // Branch a settles; b has not even been claimed.
      await h.deliver([a.body]);
      let steps = await stepsOf(id);
      expect(steps.a!.state).toBe("COMPLETED");
      expect(steps.b!.state).toBe("DISPATCHED");
      expect(steps.join).toBeUndefined();
      expect(h.queue.pending).toEqual([]);
      expect(await executionStatus(id)).toBe("RUNNING");
      // Branch b settles: now the join is dispatched, once.
      await h.deliver([b.body]);
      steps = await stepsOf(id);
      expect(steps.join!.state).toBe("DISPATCHED");
      expect(h.queue.pending.map((m) => m.body.vertexId)).toEqual(["join"]);
      await h.drain();
      steps = await stepsOf(id);
      expect(steps.join!.state).toBe("COMPLETED");
      expect(JSON.parse(steps.join!.output!)).toEqual([200, 200]);
      expect(await executionStatus(id)).toBe("COMPLETED");
    },
  );

  it("a branch not taken is SKIPPED, the skip propagates, and the join still runs when the other branch completes", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [entry, call("a"), call("c"), call("b"), { id: "join", type: "TRANSFORM", config: { output: "= steps.b.status" } }],
      edges: [
        { from: "entry", to: "a", when: "= payload.express = true" },
        { from: "a", to: "c" },
        { from: "c", to: "join" },
        { from: "entry", to: "b" },
        { from: "b", to: "join" },
      ],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, { express: false });
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.a!.state).toBe("SKIPPED");
    expect(steps.c!.state).toBe("SKIPPED");
    expect(steps.b!.state).toBe("COMPLETED");
    expect(steps.join!.state).toBe("COMPLETED");
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("a join none of whose edges were taken is SKIPPED, and so is everything after it", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [entry, call("a"), call("b"), call("join"), { id: "tail", type: "TRANSFORM", config: { output: 1 } }],
      edges: [
        { from: "entry", to: "a", when: "= false" },
        { from: "entry", to: "b" },
        { from: "a", to: "join" },
        { from: "b", to: "join", when: "= steps.b.status = 201" },
        { from: "join", to: "tail" },
      ],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, {});
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.b!.state).toBe("COMPLETED");
    expect(steps.join!.state).toBe("SKIPPED");
    expect(steps.tail!.state).toBe("SKIPPED");
    expect(h.dest.requests).toHaveLength(1);
    expect(await executionStatus(id)).toBe("COMPLETED");
  });

  it("a join fed directly by the entry point reads the entry's taken edges (recorded at the first settle)", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [entry, call("x"), { id: "join", type: "TRANSFORM", config: { output: "= payload.n" } }],
      edges: [
        { from: "entry", to: "x", when: "= false" },
        { from: "entry", to: "join" },
        { from: "x", to: "join" },
      ],
    } as WorkflowDefinitionInput);
    const id = await h.start(wf, { n: 7 });
    await h.drain();
    const steps = await stepsOf(id);
    expect(steps.x!.state).toBe("SKIPPED");
    expect(steps.join!.state).toBe("COMPLETED");
    expect(JSON.parse(steps.join!.output!)).toBe(7);

    const h2 = harness();
    const wf2 = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [entry, call("x"), { id: "join", type: "TRANSFORM", config: { output: "= payload.n" } }],
      edges: [
        { from: "entry", to: "x" },
        { from: "entry", to: "join" },
        { from: "x", to: "join" },
      ],
    } as WorkflowDefinitionInput);
    const id2 = await h2.start(wf2, { n: 8 });
    await h2.drain();
    const steps2 = await stepsOf(id2);
    expect(steps2.x!.state).toBe("COMPLETED");
    expect(steps2.join!.state).toBe("COMPLETED");
    expect(JSON.parse(steps2.join!.output!)).toBe(8);
  });
});
