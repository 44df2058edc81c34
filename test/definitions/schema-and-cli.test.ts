/// <reference types="vite/client" />
import { describe, expect, it } from "vitest";
import committed from "../../schema/workflow.schema.json";
import { validateFiles } from "../../src/cli/validate";
import { cronsFromWranglerToml } from "../../src/definitions/crons";
import { workflowJsonSchema } from "../../src/definitions/json-schema";

// The definitions only: a workflow's scenario file (`<id>.test.json`, docs/testing-workflows.md) is not one.
const examples = import.meta.glob<{ default: Record<string, unknown> }>(["../../workflows/*.json", "!../../workflows/*.test.json"], {
  eager: true,
});

describe("the committed JSON Schema", () => {
  it("is what the zod schema generates now (run `npm run schema` when this fails)", () => {
    expect(committed).toEqual(workflowJsonSchema());
  });

  it("offers the vertex types and their configs to editors", () => {
    const text = JSON.stringify(committed);
    for (const word of ["ENTRY_POINT", "GATEWAY", "TRANSFORM", "idempotencyFields", "clientErrorMode", "conflictAsProcessed", "when"]) {
      expect(text).toContain(word);
    }
    expect(committed).toMatchObject({ additionalProperties: false, required: expect.arrayContaining(["id", "vertices"]) });
  });

  it("is referenced by `$schema` in every example workflow", () => {
    // Not vacuous: an empty glob (moved or renamed examples) must fail, not pass.
    expect(Object.keys(examples).length).toBeGreaterThan(0);
    for (const [path, mod] of Object.entries(examples)) {
      expect([path, mod.default.$schema]).toEqual([path, "../schema/workflow.schema.json"]);
    }
  });
});

describe("the validate CLI's report", () => {
  it("prints file, pointer and message for every error of every file, and nothing for valid files", () => {
    const report = validateFiles([
      { path: "ok.json", text: JSON.stringify({ id: "ok", vertices: [{ id: "r", type: "ENTRY_POINT" }] }) },
      {
        path: "bad.json",
        text: JSON.stringify({
          id: "bad",
          vertices: [
            { id: "r", type: "ENTRY_POINT" },
            { id: "r", type: "TRANSFORM", config: {} },
          ],
        }),
      },
      { path: "broken.json", text: "{ nope" },
    ]);
    expect(report.fileCount).toBe(3);
    expect(report.lines).toEqual([
      expect.stringMatching(/^bad\.json \/vertices\/1\/config\/output "output" is required/),
      expect.stringMatching(/^bad\.json \/vertices\/1\/id .*\[duplicate-vertex-id\]$/),
      expect.stringMatching(/^broken\.json \(root\) the file is not valid JSON/),
    ]);
    expect(report.errorCount).toBe(3);
  });

  it("checks schedules against the crons of wrangler.toml", () => {
    const toml = '[vars]\nX = "1"\n\n[triggers]\n# comment\ncrons = ["* * * * *", "0 9 * * *"]\n\n[other]\ncrons = ["nope"]\n';
    const crons = cronsFromWranglerToml(toml);
    expect(crons).toEqual(["* * * * *", "0 9 * * *"]);
    const doc = (schedule: string) => JSON.stringify({ id: "s", vertices: [{ id: "r", type: "ENTRY_POINT", config: { schedule } }] });
    expect(validateFiles([{ path: "a.json", text: doc("0 9 * * *") }], { crons }).errorCount).toBe(0);
    expect(validateFiles([{ path: "b.json", text: doc("0 10 * * *") }], { crons }).lines[0]).toContain("[schedule-not-configured]");
  });
});
