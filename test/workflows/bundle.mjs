/**
 * The files a scenario run needs, read in Node (vitest.config.ts) and handed to the workers pool as
 * one JSON binding, `TEST_WORKFLOW_FILES` — workerd has no filesystem, so scenario, workflow and
 * connector files reach the runner as the migrations do (test/d1-template.ts).
 *
 * `SCENARIO_FILES` (comma-separated paths, set by scripts/test-workflows.mjs) chooses the scenario
 * files; unset, every `workflows/*.test.json`. Every workflow (`workflows/*.json` but the scenario
 * files) and every connector (`connectors/*.json`) goes along: a scenario's workflow is found by its
 * id, its connectors by name. (Plain JavaScript: the suite's TypeScript has no Node types.)
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";

const read = (root, file) => ({ file, text: readFileSync(join(root, file), "utf8") });

function jsonFiles(root, dir) {
  return readdirSync(join(root, dir))
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((name) => `${dir}/${name}`);
}

/** @type {import("./bundle.d.mts").loadWorkflowFiles} */
export function loadWorkflowFiles(root, selection = process.env.SCENARIO_FILES ?? "") {
  const all = jsonFiles(root, "workflows");
  const chosen = selection
    .split(",")
    .map((f) => f.trim())
    .filter((f) => f.length > 0)
    .map((f) => relative(root, resolve(root, f)));
  const scenarios = chosen.length > 0 ? chosen : all.filter((f) => f.endsWith(".test.json"));
  return {
    scenarios: scenarios.map((file) => {
      try {
        return read(root, file);
      } catch (error) {
        // The runner reports it as the file's problem (a NUL never starts a JSON text).
        return { file, text: `\u0000cannot be read: ${error.message}` };
      }
    }),
    workflows: all.filter((f) => !f.endsWith(".test.json")).map((f) => read(root, f)),
    connectors: jsonFiles(root, "connectors").map((f) => read(root, f)),
  };
}
