#!/usr/bin/env node
// Regenerate schema/workflow.schema.json from the zod schema: `npm run schema`.
// `npm run schema -- --check` exits 1 when the committed file is stale (CI); a test checks it too.
import { readFile, writeFile, mkdir } from "node:fs/promises";
import { importTs } from "./import-ts.mjs";

const { workflowJsonSchemaText, JSON_SCHEMA_PATH } = await importTs("src/definitions/json-schema.ts");
const text = workflowJsonSchemaText();

if (process.argv.includes("--check")) {
  const committed = await readFile(JSON_SCHEMA_PATH, "utf8").catch(() => "");
  if (committed !== text) {
    console.error(`${JSON_SCHEMA_PATH} is stale: run \`npm run schema\` and commit the result`);
    process.exit(1);
  }
  console.error(`${JSON_SCHEMA_PATH} is up to date`);
} else {
  await mkdir("schema", { recursive: true });
  await writeFile(JSON_SCHEMA_PATH, text);
  console.error(`wrote ${JSON_SCHEMA_PATH}`);
}
