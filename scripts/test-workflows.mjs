#!/usr/bin/env node
/**
 * `npm run test:workflows [files…] [--junit FILE] [--verbose]` (SPEC section 19, docs/testing-workflows.md):
 * every scenario of the given scenario files (default: workflows/*.test.json) played through the
 * real engine in the vitest workers pool (test/workflows/scenarios.test.ts), on a virtual clock,
 * with every destination answered from the scenario.
 *
 * Prints each scenario with ✓ or ✗ (and, for ✗, what disagrees with its trace excerpt), each invalid
 * file with its problems' pointers, then `N passed, N failed`. Exit 0 when all pass, 2 when a file
 * is invalid (whatever else happened), 1 when a scenario failed.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const args = process.argv.slice(2);
let junit;
let verbose = false;
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--junit") junit = args[++i];
  else if (args[i] === "--verbose") verbose = true;
  else if (args[i].startsWith("--")) {
    console.error(`test:workflows: unknown option ${args[i]} (use [files…] [--junit FILE] [--verbose])`);
    process.exit(2);
  } else files.push(resolve(args[i]));
}
if (junit === undefined && args.includes("--junit")) {
  console.error("test:workflows: --junit needs a file name");
  process.exit(2);
}

const started = Date.now();
const schema = spawnSync(process.execPath, ["scripts/scenario-schema.mjs", "--check"], { encoding: "utf8" });
if (schema.status !== 0) {
  process.stderr.write(schema.stderr);
  process.exit(2);
}

const dir = mkdtempSync(join(tmpdir(), "idemflow-scenarios-"));
const report = join(dir, "report.json");
const env = {
  ...process.env,
  WRANGLER_SEND_METRICS: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_HIDE_BANNER: "true",
  SCENARIO_FILES: files.join(","),
  SCENARIO_VERBOSE: verbose ? "1" : "",
};
const vitest = spawnSync(
  "npx",
  ["vitest", "run", "--project", "shard-0", "test/workflows/scenarios.test.ts", "--reporter=json", `--outputFile=${report}`],
  { env, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
);
let results;
try {
  results = JSON.parse(readFileSync(report, "utf8"));
} catch {
  // vitest did not get as far as a report: show what it said.
  process.stdout.write(vitest.stdout ?? "");
  process.stderr.write(vitest.stderr ?? "");
  console.error("test:workflows: vitest produced no report");
  rmSync(dir, { recursive: true, force: true });
  process.exit(vitest.status || 1);
}
rmSync(dir, { recursive: true, force: true });
if (verbose) process.stdout.write(vitest.stdout ?? "");

const cases = [];
let passed = 0;
let failed = 0;
let invalid = 0;
const indent = (text, by) => text.replace(/^/gm, by);
for (const suite of results.testResults ?? []) {
  if ((suite.assertionResults ?? []).length === 0 && suite.message) {
    // The runner itself did not load (not a scenario's fault): a failure, not an invalid file.
    console.log(`✗ ${suite.name}: ${suite.message}`);
    failed++;
  }
  for (const t of suite.assertionResults ?? []) {
    const meta = t.meta?.scenario;
    const file = t.ancestorTitles?.[0] ?? "?";
    if (meta?.kind === "file" || t.title === "is a valid scenario file") {
      if (t.status === "failed") {
        invalid++;
        const problems = meta?.problems ?? [];
        console.log(`✗ ${file} is not a valid scenario file`);
        for (const p of problems) console.log(`    ${p.pointer || "(the file)"}: ${p.message}`);
        if (problems.length === 0) console.log(indent(String(t.failureMessages?.[0] ?? "").split("\n")[0], "    "));
        cases.push({
          file,
          name: "(the file is valid)",
          ms: t.duration ?? 0,
          failure: problems.map((p) => `${p.pointer}: ${p.message}`).join("\n") || t.failureMessages?.[0],
        });
      }
      continue;
    }
    if (t.status === "skipped" || t.status === "pending") continue;
    const ms = Math.round(meta?.ms ?? t.duration ?? 0);
    if (t.status === "passed") {
      passed++;
      console.log(`✓ ${file} › ${t.title} (${ms} ms)`);
      cases.push({ file, name: t.title, ms });
    } else {
      failed++;
      const message = meta?.message ?? String(t.failureMessages?.[0] ?? "failed");
      console.log(`✗ ${file} › ${t.title} (${ms} ms)`);
      console.log(indent(message, "    "));
      cases.push({ file, name: t.title, ms, failure: message });
    }
  }
}
const seconds = (Date.now() - started) / 1000;
console.log(
  `${passed} passed, ${failed} failed${invalid ? `, ${invalid} invalid file${invalid === 1 ? "" : "s"}` : ""} (${seconds.toFixed(1)} s)`,
);

if (junit) {
  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const byFile = new Map();
  for (const c of cases) byFile.set(c.file, [...(byFile.get(c.file) ?? []), c]);
  const suites = [...byFile].map(([file, list]) => {
    const failures = list.filter((c) => c.failure).length;
    const body = list
      .map(
        (c) =>
          `    <testcase classname="${esc(file)}" name="${esc(c.name)}" time="${(c.ms / 1000).toFixed(3)}">` +
          (c.failure ? `\n      <failure message="${esc(c.failure.split("\n")[0])}">${esc(c.failure)}</failure>\n    ` : "") +
          `</testcase>`,
      )
      .join("\n");
    return `  <testsuite name="${esc(file)}" tests="${list.length}" failures="${failures}">\n${body}\n  </testsuite>`;
  });
  writeFileSync(
    junit,
    `<?xml version="1.0" encoding="UTF-8"?>\n` +
      `<testsuites name="idemflow scenarios" tests="${cases.length}" failures="${cases.filter((c) => c.failure).length}">\n` +
      `${suites.join("\n")}\n</testsuites>\n`,
  );
  console.log(`JUnit report: ${junit}`);
}
process.exit(invalid > 0 ? 2 : failed > 0 ? 1 : 0);
