/**
 * The JSON Schema of connectors (`connectors/*.json`), generated from the zod schema like the
 * workflows' (src/definitions/json-schema.ts): `npm run schema` writes schema/connector.schema.json
 * and a test fails when it is stale. Structure only: `npm run validate` checks the rest.
 */
import { z } from "zod";
import { ConnectorDefinition } from "./schema";

export const CONNECTOR_JSON_SCHEMA_PATH = "schema/connector.schema.json";

export function connectorJsonSchema(): Record<string, unknown> {
  const generated = z.toJSONSchema(ConnectorDefinition, { io: "input", target: "draft-7" }) as Record<string, unknown>;
  const { $schema, ...rest } = generated;
  return {
    $schema,
    title: "idemflow connector",
    description:
      "A reusable destination whose key a step cannot forget (docs/connectors.md). Generated from src/connectors/schema.ts by " +
      "`npm run schema`; `npm run validate` checks the rules a schema cannot state.",
    ...rest,
  };
}

export function connectorJsonSchemaText(): string {
  return `${JSON.stringify(connectorJsonSchema(), null, 2)}\n`;
}
