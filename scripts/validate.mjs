#!/usr/bin/env node
// Validate workflow definitions offline: `npm run validate -- workflows/*.json` (no arguments:
// every workflows/*.json). Prints `file pointer message [code]` per error; exits 1 on any error.
// Schedules are checked against the crons in ./wrangler.toml [triggers] when it exists.
import { readFile, readdir } from "node:fs/promises";
import { importTs } from "./import-ts.mjs";

const [{ validateFiles }, { cronsFromWranglerToml }] = await Promise.all([
  importTs("src/cli/validate.ts"),
  importTs("src/definitions/crons.ts"),
]);

let paths = process.argv.slice(2);
if (paths.length === 0) {
  paths = (await readdir("workflows"))
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => `workflows/${f}`);
}

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
const report = validateFiles(files, { crons });
for (const line of report.lines) console.log(line);
const failed = report.errorCount + unreadable;
console.error(failed === 0 ? `${report.fileCount} definition(s) valid` : `${failed} error(s) in ${paths.length} file(s)`);
process.exit(failed === 0 ? 0 : 1);
