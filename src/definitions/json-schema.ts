/**
 * The JSON Schema of workflow definitions, generated from the zod schema (schema.ts), so editors
 * offer completion and checks for `workflows/*.json` that reference it with `$schema`.
 * `npm run schema` writes it to schema/workflow.schema.json; a test fails when the file is stale.
 *
 * It is the *input* shape (defaults are optional and shown as `default`). It states the structure
 * only: graph rules, expressions, secrets and the key lint need `npm run validate`.
 */
import { z } from "zod";
import { WorkflowDefinition } from "./schema";

export const JSON_SCHEMA_PATH = "schema/workflow.schema.json";

export function workflowJsonSchema(): Record<string, unknown> {
  // draft-7: the dialect editors (VS Code, JetBrains) support most completely.
  const generated = z.toJSONSchema(WorkflowDefinition, { io: "input", target: "draft-7" }) as Record<string, unknown>;
  const { $schema, ...rest } = generated;
  return {
    $schema,
    title: "idemflow workflow definition",
    description:
      "A workflow: vertices (ENTRY_POINT, GATEWAY, TRANSFORM) and edges. Strings beginning with `=` are JSONata expressions. " +
      "Generated from src/definitions/schema.ts by `npm run schema`; `npm run validate` checks the rules a schema cannot state.",
    ...rest,
  };
}

/** The file's exact text (stable key order from the generator, 2-space indent, final newline). */
export function workflowJsonSchemaText(): string {
  return `${JSON.stringify(workflowJsonSchema(), null, 2)}\n`;
}
