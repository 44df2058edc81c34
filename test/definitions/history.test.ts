/**
 * A workflow's `history` (SPEC section 12, src/definitions/history-rules.ts): each retention is a
 * duration from one minute to 365 days and never shorter than the entry point's dedupe window,
 * refused at save with its pointer and a message that says how to fix it — through the validator,
 * and through PUT (422). The JSON Schema and the OpenAPI document describe the member.
 */
import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import schemaFile from "../../schema/workflow.schema.json";
import { MAX_DURATION_MS, MIN_HISTORY_MS } from "../../src/definitions/schema";
import { validateDefinition, type ValidationError } from "../../src/definitions/validate";

function errorsOf(input: unknown): ValidationError[] {
  const result = validateDefinition(input);
  return result.ok ? [] : result.errors;
}

const brief = (errors: ValidationError[]) => errors.map((e) => [e.pointer, e.code]);

/** entry (with `entry` config) → t, with `history` when given. */
const workflow = (history?: unknown, entry: Record<string, unknown> = {}, id = "hist") => ({
  id,
  vertices: [
    { id: "received", type: "ENTRY_POINT", config: entry },
    { id: "t", type: "TRANSFORM", config: { output: "= payload" } },
  ],
  edges: [{ from: "received", to: "t" }],
  ...(history === undefined ? {} : { history }),
});

const put = (id: string, body: unknown) =>
  SELF.fetch(`http://idemflow.test/v1/workflows/${id}`, {
    method: "PUT",
    headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
    body: JSON.stringify(body),
  });

describe("history: accepted", () => {
  it("keeps the member in the parsed definition, as written", () => {
    const history = { completed: "7d", failed: "30d", cancelled: 2_592_000_000 };
    const result = validateDefinition(workflow(history));
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.definition.history).toEqual(history);
  });

  it("is optional, and an absent one adds nothing to the definition (its version does not change)", () => {
    const result = validateDefinition(workflow());
    expect(result.ok).toBe(true);
    if (result.ok) expect(Object.hasOwn(result.definition, "history")).toBe(false);
  });

  it("accepts an empty object and any subset of the statuses", () => {
    expect(errorsOf(workflow({}))).toEqual([]);
    expect(errorsOf(workflow({ failed: "90d" }))).toEqual([]);
  });

  it.each([
    ["1m", "1m"],
    [MIN_HISTORY_MS, "60s"],
    ["60s", "1m"],
    ["1m", 1_000],
  ] as const)("accepts the one-minute minimum %j with a dedupe window of %j", (completed, dedupeWindow) => {
    expect(errorsOf(workflow({ completed, failed: completed, cancelled: completed }, { dedupeWindow }))).toEqual([]);
  });

  it.each(["365d", MAX_DURATION_MS, "8760h"])("accepts the 365-day maximum %j", (value) => {
    expect(errorsOf(workflow({ completed: value, failed: value, cancelled: value }))).toEqual([]);
  });

  it("accepts a retention equal to the dedupe window, the default one included", () => {
    expect(errorsOf(workflow({ completed: "24h", failed: "1d", cancelled: 86_400_000 }))).toEqual([]);
    expect(errorsOf(workflow({ completed: "48h" }, { dedupeWindow: "2d" }))).toEqual([]);
  });
});

describe("history: refused at save", () => {
  it("shorter than the dedupe window: the pointer, and a message that says what to set", () => {
    expect(errorsOf(workflow({ completed: "1h" }, { dedupeWindow: "24h" }))).toEqual([
      {
        pointer: "/history/completed",
        code: "history-shorter-than-dedupe-window",
        message:
          "history.completed 1h is shorter than the entry point's dedupeWindow 24h: a duplicate trigger inside the window must " +
          "still find its execution; set history.completed to at least 24h or shorten dedupeWindow",
      },
    ]);
  });

  it("shorter than the default window (24h) when dedupeWindow is unset, saying it is the default", () => {
    expect(errorsOf(workflow({ failed: "12h" }))).toEqual([
      {
        pointer: "/history/failed",
        code: "history-shorter-than-dedupe-window",
        message:
          "history.failed 12h is shorter than the entry point's dedupeWindow 24h (the default): a duplicate trigger inside the " +
          "window must still find its execution; set history.failed to at least 24h or set a shorter dedupeWindow",
      },
    ]);
  });

  it("names durations given in milliseconds as such", () => {
    const [error] = errorsOf(workflow({ cancelled: 1_800_000 }, { dedupeWindow: 3_600_000 }));
    expect(error).toMatchObject({ pointer: "/history/cancelled", code: "history-shorter-than-dedupe-window" });
    expect(error!.message).toContain("history.cancelled 1800000 ms is shorter than the entry point's dedupeWindow 3600000 ms");
    expect(error!.message).toContain("at least 3600000 ms");
  });

  it("reports each status at its own pointer, all at once", () => {
    const errors = errorsOf(workflow({ completed: "1h", failed: "30s", cancelled: "400d" }));
    expect(brief(errors)).toEqual([
      ["/history/completed", "history-shorter-than-dedupe-window"],
      ["/history/failed", "history-shorter-than-dedupe-window"],
      ["/history/cancelled", "duration-too-long"],
    ]);
  });

  it.each([
    ["30s", "10s"],
    [59_999, "1s"],
    ["59999ms", 1],
  ] as const)("shorter than one minute (%j, window %j): history-too-short", (completed, dedupeWindow) => {
    const errors = errorsOf(workflow({ completed }, { dedupeWindow }));
    expect(brief(errors)).toEqual([["/history/completed", "history-too-short"]]);
    expect(errors[0]!.message).toContain("shorter than one minute");
    expect(errors[0]!.message).toContain("set history.completed to `1m` or more");
  });

  it("under both floors, one error: the dedupe window's, whose fix also clears the minute", () => {
    expect(brief(errorsOf(workflow({ completed: "30s" }, { dedupeWindow: "5m" })))).toEqual([
      ["/history/completed", "history-shorter-than-dedupe-window"],
    ]);
  });

  it.each([
    ["366d", '"366d"'],
    [MAX_DURATION_MS + 1, String(MAX_DURATION_MS + 1)],
    [Number.MAX_SAFE_INTEGER, String(Number.MAX_SAFE_INTEGER)],
    ["99999999999999999999999d", '"99999999999999999999999d"'],
  ] as const)("longer than 365 days (%j): duration-too-long, like every duration", (value, shown) => {
    const errors = errorsOf(workflow({ failed: value }));
    expect(errors).toEqual([
      {
        pointer: "/history/failed",
        code: "duration-too-long",
        message:
          `history.failed ${shown} is longer than 365 days (31536000000 ms), the longest duration a definition may set; ` +
          "set `365d` or less",
      },
    ]);
  });

  it("a dedupe window over the maximum counts as the maximum: only the window is refused", () => {
    expect(brief(errorsOf(workflow({ completed: "365d" }, { dedupeWindow: "400d" })))).toEqual([
      ["/vertices/0/config/dedupeWindow", "duration-too-long"],
    ]);
  });

  it("values that are not durations are the schema's to report, once", () => {
    for (const value of ["7x", "", "0d", 0, -1, 1.5, "= payload.days", null, true]) {
      const errors = errorsOf(workflow({ completed: value }));
      expect(errors.length, JSON.stringify(value)).toBe(1);
      expect(errors[0]!.pointer).toBe("/history/completed");
      expect(errors[0]!.code).not.toMatch(/^history-/);
    }
  });

  it("an unknown status, and a history that is not an object, are schema errors", () => {
    expect(brief(errorsOf(workflow({ completed: "7d", archived: "7d" })))).toEqual([["/history/archived", "unknown-key"]]);
    expect(brief(errorsOf(workflow("7d")))).toEqual([["/history", "invalid-type"]]);
    expect(brief(errorsOf(workflow(["7d"])))).toEqual([["/history", "invalid-type"]]);
  });

  it("skips the window rule when there is not exactly one entry point (that is reported instead)", () => {
    const doc = workflow({ completed: "1h" });
    doc.vertices.push({ id: "again", type: "ENTRY_POINT", config: {} });
    const errors = errorsOf(doc);
    expect(errors.map((e) => e.code)).toContain("multiple-entry-points");
    expect(errors.map((e) => e.code)).not.toContain("history-shorter-than-dedupe-window");
  });

  it("reads own members only: prototype-named members are never taken for `history` or its statuses", () => {
    // JSON.parse makes `__proto__` an own member; it names nothing the rules look at.
    const inherited = JSON.parse(
      `{"id":"hist","vertices":[{"id":"received","type":"ENTRY_POINT"}],"__proto__":{"history":{"completed":"1s"}}}`,
    ) as unknown;
    expect(brief(errorsOf(inherited))).toEqual([["/__proto__", "unknown-key"]]);
    const statuses = JSON.parse(`{"__proto__":{"completed":"1s"},"constructor":"1s","toString":"1s"}`) as unknown;
    expect(brief(errorsOf(workflow(statuses)))).toEqual([
      ["/history/__proto__", "unknown-key"],
      ["/history/constructor", "unknown-key"],
      ["/history/toString", "unknown-key"],
    ]);
    // A `history` reached through the prototype (not JSON, but validateDefinition takes any value) is not read.
    const proto = Object.assign(Object.create({ history: { completed: "1s" } }) as object, workflow());
    expect(errorsOf(proto)).toEqual([]);
  });
});

describe("history through the API", () => {
  it("PUT answers 422 with every pointer, code and message", async () => {
    const response = await put(
      "hist-put",
      workflow({ completed: "1h", failed: "30s", cancelled: "400d" }, { dedupeWindow: "2h" }, "hist-put"),
    );
    expect(response.status).toBe(422);
    const problem = await response.json<{ code: string; errors: ValidationError[] }>();
    expect(problem.code).toBe("invalid-definition");
    expect(brief(problem.errors)).toEqual([
      ["/history/completed", "history-shorter-than-dedupe-window"],
      ["/history/failed", "history-shorter-than-dedupe-window"],
      ["/history/cancelled", "duration-too-long"],
    ]);
    expect(problem.errors[0]!.message).toBe(
      "history.completed 1h is shorter than the entry point's dedupeWindow 2h: a duplicate trigger inside the window must still " +
        "find its execution; set history.completed to at least 2h or shorten dedupeWindow",
    );
  });

  it("PUT saves a valid history and GET answers it in the definition", async () => {
    const history = { completed: "2d", failed: "90d", cancelled: "1h" };
    const response = await put("hist-ok", workflow(history, { dedupeWindow: "1h" }, "hist-ok"));
    expect(response.status).toBe(201);
    const read = await SELF.fetch("http://idemflow.test/v1/workflows/hist-ok", { headers: { authorization: "Bearer dev-token" } });
    expect(read.status).toBe(200);
    const stored = await read.json<{ definition: { history?: unknown } }>();
    expect(stored.definition.history).toEqual(history);
  });

  it("the OpenAPI document and the JSON Schema describe it", async () => {
    const response = await SELF.fetch("http://idemflow.test/v1/openapi.json");
    const document = await response.json<{ components: { schemas: Record<string, { properties?: Record<string, unknown> }> } }>();
    const described = document.components.schemas.WorkflowDefinition?.properties?.history as { description?: string } | undefined;
    expect(described?.description).toContain("at least 1m, at most 365d");
    const fileHistory = (schemaFile as { properties: Record<string, { properties?: Record<string, unknown> }> }).properties.history;
    expect(Object.keys(fileHistory?.properties ?? {})).toEqual(["completed", "failed", "cancelled"]);
  });
});
