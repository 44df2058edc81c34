import { describe, expect, it } from "vitest";
import { WorkflowDefinition } from "../../src/definitions/schema";
import { planReadySteps } from "../../src/steps/plan";

const transform = (id: string) => ({ id, type: "TRANSFORM" as const, config: { output: id } });

// received → a (taken), received → b (not taken) → c; a and c join into j.
const definition = WorkflowDefinition.parse({
  id: "plan",
  vertices: [{ id: "received", type: "ENTRY_POINT" }, transform("a"), transform("b"), transform("c"), transform("j")],
  edges: [
    { from: "received", to: "a" },
    { from: "received", to: "b", when: "= false" },
    { from: "b", to: "c" },
    { from: "a", to: "j" },
    { from: "c", to: "j" },
  ],
});

describe("planReadySteps (the start batch's plan)", () => {
  it(
    "dispatches taken successors, skips the others and their descendants, and leaves a join undecided until every predecessor " + "settles",
    () => {
      expect(planReadySteps(definition, new Map([["received", new Set(["a"])]]))).toEqual([
        { vertexId: "a", state: "DISPATCHED" },
        { vertexId: "b", state: "SKIPPED" },
        { vertexId: "c", state: "SKIPPED" },
      ]);
    },
  );

  it("skips everything below the entry when it takes no edge", () => {
    expect(planReadySteps(definition, new Map([["received", new Set<string>()]])).map((s) => [s.vertexId, s.state])).toEqual([
      ["a", "SKIPPED"],
      ["b", "SKIPPED"],
      ["c", "SKIPPED"],
      ["j", "SKIPPED"],
    ]);
  });
});
