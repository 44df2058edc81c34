/**
 * `GET /v1/openapi.json`: the OpenAPI 3.1 document of the whole HTTP API, built once per isolate
 * (on first request) from the operations (./operations.ts: one module per area under ./paths/,
 * written with ./operation.ts) and the component schemas (./components.ts). Nothing here restates
 * a shape or a route; this file turns each operation into its path item — parameters, request
 * body, answers, and the problem codes each status can carry.
 *
 * Public (no bearer token): it describes the API and holds no data. test/http/openapi.test.ts
 * fails when a route of the app is missing here; the e2e validates every answer against it.
 */
import { z } from "zod";
import { CONNECTOR_NAME_PATTERN, VERTEX_ID_PATTERN, WORKFLOW_ID_PATTERN } from "../../definitions/schema";
import { SECRET_NAME_PATTERN } from "../../definitions/secrets";
import { EVENT_SOURCE_NAME_PATTERN } from "../../events/source-definition";
import { COMPONENT_PREFIX, componentSchemas, inlineSchema, REQUEST_COMPONENTS, RESPONSE_COMPONENTS, type JsonSchema } from "./components";
import { HEADERS, merge, type Operation, type ProblemCode, type Problems } from "./operation";
import { OPERATIONS, TAGS } from "./operations";

/**
 * A path parameter's schema: the pattern the route checks it with (a name outside it is refused, or
 * cannot exist). By the parameter's name, and for `{name}` by the collection it names.
 */
function pathParameterSchema(path: string, name: string): Record<string, unknown> {
  const pattern = (re: RegExp) => ({ type: "string", pattern: re.source });
  if (name === "workflowId") return pattern(WORKFLOW_ID_PATTERN);
  if (name === "vertexId") return pattern(VERTEX_ID_PATTERN);
  if (name === "source" || (name === "name" && path.startsWith("/v1/event-sources/"))) return pattern(EVENT_SOURCE_NAME_PATTERN);
  if (name === "name" && path.startsWith("/v1/secrets/")) return pattern(SECRET_NAME_PATTERN);
  if (name === "name" && path.startsWith("/v1/connectors/")) return pattern(CONNECTOR_NAME_PATTERN);
  return { type: "string", minLength: 1 };
}

/**
 * What every `/v1` operation can answer before its route runs (src/http/route-check.ts, src/http/auth.ts):
 * a query parameter it does not list, and — except the public document — a deployment without tokens.
 */
const surfaceProblems = (op: Operation): Problems =>
  op.path.startsWith("/v1/")
    ? { 400: ["query-parameter-unknown"], ...(op.public ? {} : { 503: ["tokens-not-configured"] as ProblemCode[] }) }
    : {};

function buildDocument(): JsonSchema {
  const responses = componentSchemas(RESPONSE_COMPONENTS, "output");
  const requests = componentSchemas(REQUEST_COMPONENTS, "input");
  for (const name of Object.keys(requests.schemas)) {
    const existing = responses.schemas[name];
    if (existing !== undefined && JSON.stringify(existing) !== JSON.stringify(requests.schemas[name])) {
      throw new Error(`openapi: component ${name} differs between its input and output shapes`);
    }
  }
  const responseSchema = (schema: z.ZodType): JsonSchema => {
    const name = responses.get(schema);
    if (name) return { $ref: `${COMPONENT_PREFIX}${name}` };
    // A union of components (the test run's two answers): each branch by reference.
    if (schema instanceof z.ZodUnion) return { anyOf: (schema.options as z.ZodType[]).map(responseSchema) };
    return inlineSchema(schema, "output");
  };
  const requestSchema = (schema: z.ZodType): JsonSchema => {
    const name = requests.get(schema);
    return name ? { $ref: `${COMPONENT_PREFIX}${name}` } : inlineSchema(schema, "input");
  };

  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) {
    const parameters: unknown[] = [...op.path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({
      name,
      in: "path",
      required: true,
      schema: pathParameterSchema(op.path, name!),
    }));
    for (const [name, field] of Object.entries(op.query?.shape ?? {})) {
      const schema = field as z.ZodType;
      parameters.push({
        name,
        in: "query",
        required: !schema.safeParse(undefined).success,
        ...(schema.description ? { description: schema.description } : {}),
        schema: inlineSchema(schema, "input"),
      });
    }
    for (const h of op.headers ?? []) {
      parameters.push({
        name: h.name,
        in: "header",
        required: h.required,
        description: h.description,
        schema: h.schema ?? { type: "string" },
      });
    }

    const answers: Record<string, unknown> = {};
    for (const [status, answer] of Object.entries(op.answers)) {
      const headers = answer.headers?.length ? { headers: Object.fromEntries(answer.headers.map((h) => [h, HEADERS[h]])) } : {};
      const content = answer.schema
        ? { content: { "application/json": { schema: responseSchema(answer.schema) } } }
        : answer.contentType
          ? { content: { [answer.contentType]: { schema: answer.bodySchema ?? {} } } }
          : {};
      answers[status] = { description: answer.description, ...headers, ...content };
    }
    for (const [status, codes] of Object.entries(merge(op.problems, surfaceProblems(op)))) {
      const headers =
        status === "401" && !op.public
          ? { headers: { "www-authenticate": HEADERS["www-authenticate"] } }
          : status === "409" || status === "503"
            ? { headers: { "retry-after": HEADERS["retry-after"] } }
            : {};
      const described = `problem+json, \`code\` one of: ${(codes ?? []).map((c) => `\`${c}\``).join(", ")}`;
      const existing = answers[status] as { description: string } | undefined;
      if (existing) throw new Error(`openapi: ${op.operationId} answers ${status} both as a result and as a problem`);
      answers[status] = {
        description: described,
        ...headers,
        content: { "application/problem+json": { schema: { $ref: `${COMPONENT_PREFIX}Problem` } } },
      };
    }

    paths[op.path] ??= {};
    paths[op.path]![op.method] = {
      operationId: op.operationId,
      summary: op.summary,
      tags: [op.tag],
      ...(op.public ? { security: [] } : op.operator ? { security: [{ operator: [] }] } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(op.body
        ? {
            requestBody: {
              required: op.body.required,
              description: op.body.description,
              content: { [op.body.contentType ?? "application/json"]: { schema: requestSchema(op.body.schema) } },
            },
          }
        : {}),
      responses: answers,
    };
  }

  return {
    openapi: "3.1.0",
    info: {
      title: "idemflow",
      version: "1",
      description:
        "A workflow engine where retries never become double charges. Every error is application/problem+json with a stable `code` " +
        "(docs/problems.md); an unknown route answers 404 `route-not-found`, a method a `/v1` path does not serve 405 " +
        "`method-not-allowed` with `Allow`, and a query parameter a `/v1` operation does not list 400 `query-parameter-unknown`. " +
        "Generated from the zod schemas of src/http/openapi.",
      // Not open source (yet): an SPDX custom reference, not a license this project does not grant.
      license: { name: "Proprietary", identifier: "LicenseRef-idemflow-proprietary" },
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    // Relative: the origin that served this document (under `npm start`, http://localhost:8787).
    servers: [{ url: "/", description: "the engine that served this document (npm start: http://localhost:8787)" }],
    security: [{ bearer: [] }],
    tags: TAGS,
    paths,
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", description: "a token of `API_TOKENS`; it names the workspace (locally `dev-token`)" },
        operator: {
          type: "http",
          scheme: "bearer",
          description: "a token of `OPERATOR_TOKENS` (locally `operator-token`); it names no workspace and grants none",
        },
      },
      schemas: { ...responses.schemas, ...requests.schemas },
    },
  };
}

let built: string | undefined;

/** The document's JSON text, built on first use and kept for the isolate's life. */
export function openApiDocumentText(): string {
  built ??= JSON.stringify(buildDocument());
  return built;
}

export function openApiDocument(): JsonSchema {
  return JSON.parse(openApiDocumentText()) as JsonSchema;
}

/** The route handler: `app.get("/v1/openapi.json", serveOpenApi)`. */
export function serveOpenApi(): Response {
  return new Response(openApiDocumentText(), { headers: { "content-type": "application/json", "cache-control": "public, max-age=300" } });
}
