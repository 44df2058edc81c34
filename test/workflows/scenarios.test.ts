/**
 * The scenario files (`workflows/*.test.json`, or `SCENARIO_FILES`: test/workflows/bundle.ts), each
 * checked, then each of its scenarios played through the real engine (./runner.ts). Run by
 * `npm run test:workflows [files…]` (scripts/test-workflows.mjs reads the results from each test's
 * `meta.scenario`) and, for the shipped files, by `npm run test:unit`.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, it, vi } from "vitest";
import { checkScenarioFile, describeProblems, parseScenarioFile, runScenario, type Checked } from "./runner";

const files = env.TEST_WORKFLOW_FILES;

// The engine's log lines (one JSON line per event) would bury the results; SCENARIO_VERBOSE keeps them.
beforeAll(() => {
  if (env.SCENARIO_VERBOSE) return;
  for (const method of ["log", "warn", "error"] as const) vi.spyOn(console, method).mockImplementation(() => undefined);
});

for (const { file, text } of files.scenarios) {
  describe(file, () => {
    let checked: Checked | undefined;
    const parsed = parseScenarioFile(file, text);
    it("is a valid scenario file", async ({ task }) => {
      checked = await checkScenarioFile(files, file, text);
      task.meta.scenario = { file, kind: "file", problems: checked.ok ? [] : checked.problems };
      if (!checked.ok) throw new Error(describeProblems(file, checked.problems));
    });
    const scenarios = "parsed" in parsed ? parsed.parsed.scenarios : [];
    scenarios.forEach((scenario, index) => {
      it(scenario.name, async ({ task, skip }) => {
        if (!checked?.ok) return skip("the file is not valid");
        const started = performance.now();
        const message = await runScenario(files, checked, scenario);
        task.meta.scenario = { file, kind: "scenario", index, name: scenario.name, message, ms: performance.now() - started };
        if (message !== null) throw new Error(message);
      });
    });
  });
}
