#!/usr/bin/env node
// Regenerate schema/scenario.schema.json from the zod schema (test/workflows/scenario-schema.ts):
// `node scripts/scenario-schema.mjs`; `--check` exits 1 when the committed file is stale
// (`npm run test:workflows` runs the check).
import { readFile, writeFile } from "node:fs/promises";
import { importTs } from "./import-ts.mjs";

const { scenarioJsonSchemaText, SCENARIO_JSON_SCHEMA_PATH } = await importTs("test/workflows/scenario-schema.ts");
const text = scenarioJsonSchemaText();
if (process.argv.includes("--check")) {
  const committed = await readFile(SCENARIO_JSON_SCHEMA_PATH, "utf8").catch(() => "");
  if (committed !== text) {
    console.error(`${SCENARIO_JSON_SCHEMA_PATH} is stale: run \`node scripts/scenario-schema.mjs\` and commit the result`);
    process.exit(1);
  }
} else {
  await writeFile(SCENARIO_JSON_SCHEMA_PATH, text);
  console.error(`wrote ${SCENARIO_JSON_SCHEMA_PATH}`);
}
