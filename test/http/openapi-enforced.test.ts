/**
 * The OpenAPI document states what the server enforces (issue 41): a request the document accepts
 * is never refused for a reason it does not give. Each pattern is built from the validator's own
 * constant; this file checks that the document carries it, and that a value the document's pattern
 * accepts is one the validator accepts (samples, and a seeded random walk over the alphabet).
 * The e2e validates every request it sends against the document too (scripts/lib/openapi-check.mjs).
 */
import { describe, expect, it } from "vitest";
import { CONNECTOR_NAME_PATTERN, EVENT_NAME_PATTERN, VERTEX_ID_PATTERN, WORKFLOW_ID_PATTERN } from "../../src/definitions/schema";
import { SECRET_NAME_PATTERN, SECRET_TEMPLATE_SOURCE } from "../../src/definitions/secrets";
import { EVENT_SOURCE_NAME_PATTERN } from "../../src/events/source-definition";
import { parseEventId } from "../../src/http/execution-events";
import { parseIdempotencyKey } from "../../src/http/idempotency/key";
import { openApiDocument } from "../../src/http/openapi/document";
import { DEFAULT_KEY_CONSTRAINTS, validateKey } from "../../src/lib/key-constraints";
import { MAX_EXACT_NUMBER } from "../../src/lib/json-numbers";

type Schema = Record<string, unknown> & { pattern?: string; properties?: Record<string, Schema>; anyOf?: Schema[] };
interface Parameter {
  name: string;
  in: string;
  schema: Schema;
}
interface Doc {
  paths: Record<string, Record<string, { parameters?: Parameter[]; requestBody?: { content: Record<string, { schema: Schema }> } }>>;
  components: { schemas: Record<string, Schema> };
}

const doc = openApiDocument() as unknown as Doc;
const parameter = (path: string, method: string, name: string): Parameter | undefined =>
  doc.paths[path]?.[method]?.parameters?.find((p) => p.name === name);
const resolve = (schema: Schema): Schema =>
  typeof schema.$ref === "string" ? doc.components.schemas[(schema.$ref as string).split("/").pop()!]! : schema;

/** A seeded generator of strings over printable ASCII and a few others, biased to the edges. */
function* samples(seed: number, count: number, alphabet = " !\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~\té"): Generator<string> {
  let state = seed;
  const next = () => (state = (state * 1103515245 + 12345) % 2 ** 31);
  for (let i = 0; i < count; i++) {
    const length = [0, 1, 2, 3, 8, 64, 254, 255, 256][next() % 9]!;
    let text = "";
    for (let j = 0; j < length; j++) text += alphabet[next() % alphabet.length];
    yield text;
  }
}

describe("the OpenAPI document states what the server enforces", () => {
  it("states each path name's pattern from the route's own constant", () => {
    const expected: Array<[string, string, string, RegExp]> = [
      ["/v1/workflows/{workflowId}", "put", "workflowId", WORKFLOW_ID_PATTERN],
      ["/v1/workflows/{workflowId}/trigger", "post", "workflowId", WORKFLOW_ID_PATTERN],
      ["/v1/executions/{executionId}/steps/{vertexId}/retry", "post", "vertexId", VERTEX_ID_PATTERN],
      ["/v1/secrets/{name}", "put", "name", SECRET_NAME_PATTERN],
      ["/v1/connectors/{name}", "put", "name", CONNECTOR_NAME_PATTERN],
      ["/v1/event-sources/{name}", "put", "name", EVENT_SOURCE_NAME_PATTERN],
      ["/events/{workspaceId}/{source}", "post", "source", EVENT_SOURCE_NAME_PATTERN],
    ];
    for (const [path, method, name, pattern] of expected) {
      expect(parameter(path, method, name)?.schema.pattern, `${method} ${path} {${name}}`).toBe(pattern.source);
    }
  });

  it("states the Idempotency-Key header's alphabet and sf-string rule: every value it accepts, the server accepts", () => {
    const header = parameter("/v1/events", "post", "Idempotency-Key")!.schema;
    expect(header.pattern).toBeDefined();
    const pattern = new RegExp(header.pattern!);
    for (const key of ["abc", "a b", '"a,b"', '"a\\"b"', 'a"b', "x".repeat(255), `"${"x".repeat(255)}"`]) {
      expect(pattern.test(key), key).toBe(true);
      expect(parseIdempotencyKey(key).ok, key).toBe(true);
    }
    for (const key of ["", "a,b", '""', "é", `${"x".repeat(256)}`, '"a\\b"']) expect(pattern.test(key), key).toBe(false);
    let accepted = 0;
    for (const value of samples(41, 5000)) {
      for (const candidate of [value, `"${value}"`]) {
        if (!pattern.test(candidate)) continue;
        accepted++;
        expect(parseIdempotencyKey(candidate), JSON.stringify(candidate)).toMatchObject({ ok: true });
      }
    }
    expect(accepted).toBeGreaterThan(100);
    // Every route that reads the header states the same rule.
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const p = op.parameters?.find((q) => q.name === "Idempotency-Key");
        if (p) expect(p.schema.pattern, `${method} ${path}`).toBe(header.pattern);
      }
    }
  });

  it("states Last-Event-ID and ?lastEventId as the stream reads them", () => {
    const header = new RegExp(parameter("/v1/executions/{executionId}/events", "get", "Last-Event-ID")!.schema.pattern!);
    const query = new RegExp(parameter("/v1/executions/{executionId}/events", "get", "lastEventId")!.schema.pattern!);
    for (const id of ["", "0.0", "12.3", "12.3.end", "123456789012345.1", "1.2.3", "a.b", "1.", "1234567890123456.1", "-1.2"]) {
      if (header.test(id)) expect(parseEventId(id), id).not.toBeNull();
      if (query.test(id)) expect(parseEventId(id), id).not.toBeNull();
    }
    expect(header.test("12.3.end") && query.test("12.3") && !query.test("1.2.3")).toBe(true);
  });

  it("states the events route's name, match and id", () => {
    const body = resolve(doc.paths["/v1/events"]!.post!.requestBody!.content["application/json"]!.schema);
    const { name, match, id } = body.properties!;
    expect(name!.pattern).toBe(EVENT_NAME_PATTERN.source);
    const idPattern = new RegExp(id!.pattern!);
    for (const value of samples(7, 3000)) {
      if (idPattern.test(value)) expect(validateKey(value, DEFAULT_KEY_CONSTRAINTS).ok, JSON.stringify(value)).toBe(true);
    }
    const number = match!.anyOf!.find((s) => s.type === "number")!;
    expect([number.minimum, number.maximum]).toEqual([-MAX_EXACT_NUMBER, MAX_EXACT_NUMBER]);
    const text = match!.anyOf!.find((s) => s.type === "string")!;
    expect(text.minLength).toBe(1);
    expect(new RegExp(text.pattern!).test("   ")).toBe(false);
  });

  it("states the secret template of an event source and of a signed entry point", () => {
    const whole = new RegExp(String.raw`^\s*` + SECRET_TEMPLATE_SOURCE + String.raw`\s*$`).source;
    const source = doc.components.schemas.EventSourceDefinitionInput!;
    expect(source.properties!.secret!.pattern).toBe(whole);
    const text = JSON.stringify(doc.components.schemas.WorkflowDefinitionInput);
    expect(text).toContain(JSON.stringify(whole));
  });

  it("states the 2^53 bound of numbers in any-JSON payloads, at any depth", () => {
    const payload = doc.components.schemas.JsonPayload!;
    expect(String(payload.description)).toContain(String(MAX_EXACT_NUMBER));
    expect([payload.minimum, payload.maximum]).toEqual([-MAX_EXACT_NUMBER, MAX_EXACT_NUMBER]);
    // Every item and member is a JsonPayload again (a generated client still types it `unknown`).
    expect(payload.unevaluatedItems).toEqual({ $ref: "#/components/schemas/JsonPayload" });
    expect(payload.unevaluatedProperties).toEqual({ $ref: "#/components/schemas/JsonPayload" });
    const trigger = doc.paths["/v1/workflows/{workflowId}/trigger"]!.post!.requestBody!.content["application/json"]!.schema;
    expect(trigger).toEqual({ $ref: "#/components/schemas/JsonPayload" });
  });
});
