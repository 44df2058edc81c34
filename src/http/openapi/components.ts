/**
 * The document's component schemas, made with zod 4's own `z.toJSONSchema`: responses in output
 * mode (./responses.ts), request bodies in input mode (./requests.ts, the workflow definition
 * being the schema the PUT validates with). A new response or body shape a route answers by
 * reference is one line in `RESPONSE_COMPONENTS` or `REQUEST_COMPONENTS`.
 */
import { z } from "zod";
import { MAX_EXACT_NUMBER } from "../../lib/json-numbers";
import * as req from "./requests";
import * as res from "./responses";

export const COMPONENT_PREFIX = "#/components/schemas/";
export type JsonSchema = Record<string, unknown>;

/** The component schemas: responses in output mode, request bodies in input mode. */
export const RESPONSE_COMPONENTS: Record<string, z.ZodType> = {
  Problem: res.Problem,
  Health: res.Health,
  OpenApiDocument: res.OpenApiDocument,
  WorkflowList: res.WorkflowList,
  SavedWorkflow: res.SavedWorkflow,
  StoredWorkflowRead: res.StoredWorkflowRead,
  WorkflowDefinition: req.WorkflowDefinition,
  ScheduleRun: res.ScheduleRun,
  StartResult: res.StartResult,
  StartOverResult: res.StartOverResult,
  DuplicatesStopped: res.DuplicatesStopped,
  DuplicateTrigger: res.DuplicateTrigger,
  ExecutionSummary: res.ExecutionSummary,
  ExecutionPage: res.ExecutionPage,
  RemovedExecution: res.RemovedExecution,
  KeySend: res.KeySend,
  Trace: res.Trace,
  TestRunTrace: res.TestRunTrace,
  Step: res.Step,
  StepUndo: res.StepUndo,
  Compensation: res.Compensation,
  Attempt: res.Attempt,
  StepEvent: res.StepEvent,
  DestinationKey: res.DestinationKey,
  RetryAccepted: res.RetryAccepted,
  CancelResult: res.CancelResult,
  ErasureResult: res.ErasureResult,
  Stats: res.Stats,
  StatsSeries: res.StatsSeries,
  StorageFigures: res.StorageFigures,
  SecretListing: res.SecretListing,
  SecretList: res.SecretList,
  SavedConnector: res.SavedConnector,
  StoredConnectorRead: res.StoredConnectorRead,
  ConnectorList: res.ConnectorList,
  EventSource: res.EventSource,
  EventSourceList: res.EventSourceList,
  EventSourceDefinition: req.EventSourceDefinition,
  DemoOrder: res.DemoOrder,
};
export const REQUEST_COMPONENTS: Record<string, z.ZodType> = {
  WorkflowDefinitionInput: req.WorkflowDefinition,
  RetryBody: req.RetryBody,
  CancelBody: req.CancelBody,
  SecretBody: req.SecretBody,
  ConnectorDefinition: req.ConnectorDefinition,
  EventSourceDefinitionInput: req.EventSourceDefinition,
  JsonPayload: req.TriggerPayload,
};

/**
 * zod's registry output, made OpenAPI components: no per-schema `$schema`/`$id` (the document's
 * dialect is 2020-12), and the schemas zod shares under `__shared` (those with a global `id`,
 * such as `JsonValue`) hoisted to components of their own.
 */
export function componentSchemas(
  components: Record<string, z.ZodType>,
  io: "input" | "output",
): Map<z.ZodType, string> & { schemas: JsonSchema } {
  const registry = z.registry<{ id: string }>();
  const names = new Map<z.ZodType, string>();
  for (const [id, schema] of Object.entries(components)) {
    registry.add(schema, { id });
    names.set(schema, id);
  }
  const generated = z.toJSONSchema(registry, { io, target: "draft-2020-12", uri: (id) => `${COMPONENT_PREFIX}${id}` });
  const text = JSON.stringify(generated.schemas).replaceAll(`${COMPONENT_PREFIX}__shared#/$defs/`, COMPONENT_PREFIX);
  const raw = JSON.parse(text) as Record<string, JsonSchema>;
  const schemas: JsonSchema = {};
  for (const [id, schema] of Object.entries(raw)) {
    if (id === "__shared") {
      Object.assign(schemas, schema.$defs as JsonSchema);
      continue;
    }
    const { $schema: _dialect, $id: _id, ...rest } = schema;
    schemas[id] = rest;
  }
  return Object.assign(names, { schemas: plainJsonValues(schemas, new Set(Object.keys(components))) });
}

const ANY_JSON = "any JSON value";

/**
 * A JSON value (`z.json()`: a definition's `JsonValue`, a trigger's payload) is recursive: zod
 * states it as a union that holds an array and an object of itself, under an auto-generated name
 * (`schema0`) when no id names it. Common generators emit TypeScript from that union that does not
 * compile (openapi-typescript 7: TS2502, "referenced directly or indirectly in its own type
 * annotation"), and the auto-generated name leaks into the public document. To a client such a
 * schema is what it says — any JSON value — so it is stated as that (`{}` with its description),
 * and one without a name of ours is inlined where it is used.
 */
function plainJsonValues(schemas: JsonSchema, named: ReadonlySet<string>): JsonSchema {
  const isJsonValue = (name: string, schema: unknown): boolean => {
    const anyOf = (schema as { anyOf?: unknown } | undefined)?.anyOf;
    return (
      Array.isArray(anyOf) &&
      anyOf.some(
        (branch: { type?: unknown; items?: { $ref?: unknown } }) =>
          branch.type === "array" && branch.items?.$ref === `${COMPONENT_PREFIX}${name}`,
      )
    );
  };
  const recursive = Object.keys(schemas).filter((name) => isJsonValue(name, schemas[name]));
  const anonymous = new Set(
    recursive.filter((name) => !named.has(name) && !/^[A-Z]/.test(name)).map((name) => `${COMPONENT_PREFIX}${name}`),
  );
  // A named component that is only a reference to an anonymous JSON value (`z.json().describe(…)`) is one too.
  const aliases = Object.keys(schemas).filter((name) => {
    const { $ref, description: _description, ...rest } = schemas[name] as { $ref?: unknown; description?: unknown };
    return typeof $ref === "string" && anonymous.has($ref) && Object.keys(rest).length === 0;
  });
  const out: JsonSchema = {};
  for (const [name, schema] of Object.entries(schemas)) {
    if (anonymous.has(`${COMPONENT_PREFIX}${name}`)) continue;
    const description = (schema as { description?: string }).description;
    // Stated as "anything", with the number bound every body is checked against (src/lib/json-numbers.ts:
    // every number, at any depth, at most 2^53 − 1 in magnitude; `minimum`/`maximum` bind numbers only),
    // recursing through `unevaluatedItems`/`unevaluatedProperties` (here: every item, every member) rather
    // than a self-referencing `anyOf`, so generators emit `unknown`, not a type that refers to itself (TS2502).
    out[name] =
      recursive.includes(name) || aliases.includes(name)
        ? {
            description: description ?? ANY_JSON,
            minimum: -MAX_EXACT_NUMBER,
            maximum: MAX_EXACT_NUMBER,
            unevaluatedItems: { $ref: `${COMPONENT_PREFIX}${name}` },
            unevaluatedProperties: { $ref: `${COMPONENT_PREFIX}${name}` },
          }
        : schema;
  }
  // A reference to an inlined one keeps the referrer's own members (its description).
  const inline = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(inline);
    if (value === null || typeof value !== "object") return value;
    const { $ref, ...rest } = value as Record<string, unknown>;
    if (typeof $ref === "string" && anonymous.has($ref)) return Object.keys(rest).length > 0 ? inline(rest) : { description: ANY_JSON };
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, inline(v)]));
  };
  return inline(out) as JsonSchema;
}

export function inlineSchema(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, target: "draft-2020-12", unrepresentable: "any" }) as JsonSchema;
  return rest;
}
