/**
 * The reference analysis behind "a step loads only the outputs it can reach"
 * (src/definitions/step-inputs.ts). It may over-approximate (load more) but never miss a
 * reference: a `when` must never see a missing output that exists.
 */
import { describe, expect, it } from "vitest";
import { WorkflowDefinition, type WorkflowDefinitionInput } from "../../src/definitions/schema";
import { expressionRefs, stepInputsOf, STEP_INPUTS_VERSION } from "../../src/definitions/step-inputs";
import { validateDefinition } from "../../src/definitions/validate";

const refs = (source: string) => {
  const r = expressionRefs(source);
  return { all: r.all, payload: r.payload, steps: [...r.steps].sort() };
};

describe("expressionRefs", () => {
  it.each([
    ["steps.charge.status = 201", ["charge"]],
    ["steps.`my-step`.body", ["my-step"]],
    ['steps."quoted".x', ["quoted"]],
    ["$.steps.a.x & $$.steps.b.y", ["a", "b"]],
    ["steps.a[0].b", ["a"]],
    ["{ 'x': steps.a, 'y': [steps.b.c] }", ["a", "b"]],
    ["$map(steps.a.items, function($i) { $i.price })", ["a"]],
    ["payload.items[price > steps.limits.min]", ["limits"]], // over-approximated: item.steps read as root steps
    ["payload.steps.x", []], // a member named steps inside the payload is not the context's steps
    ["payload.items[$ > 3]", []], // `$` inside a filter is the item
  ])("%s reads exactly %j", (source, steps) => {
    expect(refs(source)).toMatchObject({ all: false, steps });
  });

  it.each([
    "steps",
    "$keys(steps)",
    "$lookup(steps, 'charge')",
    "$each(steps, function($v, $k) { $k })",
    "$sift(steps, function($v) { true })",
    "($s := steps; $s.charge)",
    "steps.*",
    "steps.*.status",
    "steps.**",
    "**.status",
    "*.charge",
    "steps[0]",
    "steps.(charge)",
    "steps.$lookup($, 'charge')",
    "steps{ 'a': 1 }",
    "steps^(x)",
    "$$",
    "$",
    "$string($)",
    "$lookup($$, 'steps')",
    "($root := $; $root.steps.a)",
    "$eval('steps.a')",
    "payload.%.steps",
  ])("%s reads every output", (source) => {
    expect(expressionRefs(source).all).toBe(true);
  });

  it("notes the payload, directly or through the root", () => {
    expect(refs("payload.order.id").payload).toBe(true);
    expect(refs("$$.payload.order.id").payload).toBe(true);
    expect(refs("steps.a.x").payload).toBe(false);
  });
});

function definition(input: WorkflowDefinitionInput): WorkflowDefinition {
  const result = validateDefinition(input);
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.definition;
}

describe("stepInputsOf", () => {
  const wf = definition({
    id: "inputs",
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      { id: "a", type: "TRANSFORM", config: { output: "= payload.x" } },
      { id: "b", type: "TRANSFORM", config: { output: { n: "= steps.a" } } },
      { id: "c", type: "TRANSFORM", config: { output: "constant" } },
      { id: "d", type: "TRANSFORM", config: { output: "= steps.received.id" } },
      { id: "e", type: "TRANSFORM", config: { output: "= $keys(steps)" } },
    ],
    edges: [
      { from: "received", to: "a", when: "= payload.go" },
      { from: "a", to: "b" },
      { from: "b", to: "c", when: "= steps.a.ok and steps.b.n" },
      { from: "c", to: "d" },
      { from: "d", to: "e" },
    ],
  } as WorkflowDefinitionInput);
  const spec = stepInputsOf(wf);

  it("per vertex: its config and its outgoing edges; the entry's output is the payload", () => {
    expect(spec.v).toBe(STEP_INPUTS_VERSION);
    expect(spec.vertices.a).toEqual({ all: false, payload: true, steps: [] });
    expect(spec.vertices.b).toEqual({ all: false, payload: false, steps: ["a", "b"] }); // its own edge reads a and b
    expect(spec.vertices.c).toEqual({ all: false, payload: false, steps: [] });
    expect(spec.vertices.d).toEqual({ all: false, payload: true, steps: [] });
    expect(spec.vertices.e).toEqual({ all: true, payload: true, steps: [] });
    expect(spec.vertices.received!.payload).toBe(true);
  });

  it("the entry's edges, which a settle backfills when ingress did not record them", () => {
    expect(spec.backfill).toEqual({ all: false, payload: true, steps: [] });
  });
});

describe("size limits a definition may set are bounded by D1", () => {
  const base = (entry: Record<string, unknown>, gateway: Record<string, unknown> = {}) => ({
    id: "limits",
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: entry },
      { id: "call", type: "GATEWAY", config: { method: "POST", url: "http://localhost:8788/x", ...gateway } },
    ],
    edges: [{ from: "received", to: "call" }],
  });

  it("maxPayloadBytes above 1 MiB is refused with a pointer and what to do", () => {
    const result = validateDefinition(base({ maxPayloadBytes: 1024 * 1024 + 1 }));
    expect(result.ok).toBe(false);
    expect(!result.ok && result.errors).toEqual([
      {
        pointer: "/vertices/0/config/maxPayloadBytes",
        code: "limit-above-d1",
        message: expect.stringMatching(/2,000,000 bytes; set it to 1048576 or less/),
      },
    ]);
    expect(validateDefinition(base({ maxPayloadBytes: 1024 * 1024 })).ok).toBe(true);
  });

  it("maxResponseBytes above 1 MiB is refused with a pointer and why", () => {
    const result = validateDefinition(base({}, { maxResponseBytes: 2 * 1024 * 1024 }));
    expect(!result.ok && result.errors).toEqual([
      {
        pointer: "/vertices/1/config/maxResponseBytes",
        code: expect.any(String),
        message: expect.stringMatching(/D1 refuses rows over 2,000,000 bytes/),
      },
    ]);
  });
});
