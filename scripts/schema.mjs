#!/usr/bin/env node
// Regenerate schema/workflow.schema.json from the zod schema: `npm run schema`.
// `npm run schema -- --check` exits 1 when the committed file is stale (CI); a test checks it too.
import { readFile, writeFile, mkdir } from "node:fs/promises";
import { importTs } from "./import-ts.mjs";

const { workflowJsonSchemaText, JSON_SCHEMA_PATH } = await importTs("src/definitions/json-schema.ts");
const { connectorJsonSchemaText, CONNECTOR_JSON_SCHEMA_PATH } = await importTs("src/connectors/json-schema.ts");

let stale = false;
for (const [path, text] of [
  [JSON_SCHEMA_PATH, workflowJsonSchemaText()],
  [CONNECTOR_JSON_SCHEMA_PATH, connectorJsonSchemaText()],
]) {
  if (process.argv.includes("--check")) {
    const committed = await readFile(path, "utf8").catch(() => "");
    if (committed !== text) {
      console.error(`${path} is stale: run \`npm run schema\` and commit the result`);
      stale = true;
    } else console.error(`${path} is up to date`);
  } else {
    await mkdir("schema", { recursive: true });
    await writeFile(path, text);
    console.error(`wrote ${path}`);
  }
}
if (stale) process.exit(1);
