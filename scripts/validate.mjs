#!/usr/bin/env node
// Validate workflow definitions and connectors offline: `npm run validate -- workflows/*.json
// connectors/*.json` (no arguments: every workflows/*.json but the scenario files *.test.json, and connectors/*.json). A workflow that
// names a connector is resolved against the connector files given, or else those in connectors/.
// Prints `file pointer message [code]` per error (and per warning, marked); exits 1 on any error.
// Schedules are checked against the crons in ./wrangler.toml [triggers] when it exists.
import { readFile, readdir } from "node:fs/promises";
import { importTs } from "./import-ts.mjs";

const [{ validateFiles }, { cronsFromWranglerToml }] = await Promise.all([
  importTs("src/cli/validate.ts"),
  importTs("src/definitions/crons.ts"),
]);

const jsonFilesOf = async (dir) =>
  (await readdir(dir).catch(() => []))
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => `${dir}/${f}`);

let paths = process.argv.slice(2);
// The definitions only: a workflow's scenario file (`<id>.test.json`) is `npm run test:workflows`'s.
if (paths.length === 0)
  paths = [...(await jsonFilesOf("workflows")).filter((f) => !f.endsWith(".test.json")), ...(await jsonFilesOf("connectors"))];
const connectorFiles = await Promise.all(
  (await jsonFilesOf("connectors")).map(async (path) => ({ path, text: await readFile(path, "utf8") })),
);

const files = [];
let unreadable = 0;
for (const path of paths) {
  try {
    files.push({ path, text: await readFile(path, "utf8") });
  } catch (error) {
    unreadable += 1;
    console.log(`${path} (root) cannot be read: ${error.code ?? error.message} [unreadable]`);
  }
}

const crons = await readFile("wrangler.toml", "utf8").then(cronsFromWranglerToml, () => undefined);
const report = validateFiles(files, { crons, connectors: connectorFiles });
for (const line of report.lines) console.log(line);
const failed = report.errorCount + unreadable;
const warned = report.warningCount > 0 ? ` (${report.warningCount} warning(s))` : "";
console.error(failed === 0 ? `${report.fileCount} file(s) valid${warned}` : `${failed} error(s) in ${paths.length} file(s)${warned}`);
process.exit(failed === 0 ? 0 : 1);
