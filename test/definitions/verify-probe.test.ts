/**
 * The verify probe of a write step (`config.verify`): what a definition may declare, and what the
 * probe's expressions make the step load.
 */
import { describe, expect, it } from "vitest";
import { WorkflowDefinition, type WorkflowDefinitionInput } from "../../src/definitions/schema";
import { stepInputsOf } from "../../src/definitions/step-inputs";
import { validateDefinition, type ValidationError } from "../../src/definitions/validate";

const LEGACY = "http://localhost:8788/legacy/orders";

/** entry → lookup (GET) → create (POST, with the probe given). */
function withProbe(verify: Record<string, unknown>, create: Record<string, unknown> = {}): WorkflowDefinitionInput {
  return {
    id: "probe",
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      { id: "lookup", type: "GATEWAY", config: { method: "GET", url: LEGACY, query: { external_id: "= payload.order.id" } } },
      {
        id: "create",
        type: "GATEWAY",
        config: { method: "POST", url: LEGACY, body: "= { 'external_id': payload.order.id }", verify, ...create },
      },
    ],
    edges: [
      { from: "received", to: "lookup" },
      { from: "lookup", to: "create" },
    ],
  } as WorkflowDefinitionInput;
}

const probe = { url: LEGACY, query: { external_id: "= payload.order.id" }, condition: "= $count(body.items) > 0" };

function errorsOf(input: unknown): Array<Pick<ValidationError, "pointer" | "code">> {
  const result = validateDefinition(input);
  return result.ok ? [] : result.errors.map(({ pointer, code }) => ({ pointer, code }));
}

const at = (...path: string[]) => ["/vertices/2/config/verify", ...path].join("/");

describe("a verify probe in a definition", () => {
  it("is accepted on a write, with a literal secret header, and parses without defaults of its own", () => {
    const doc = withProbe({ ...probe, headers: { Authorization: "Bearer {{ secrets.LEGACY_KEY }}" } });
    expect(errorsOf(doc)).toEqual([]);
    const create = WorkflowDefinition.parse(doc).vertices[2]!;
    expect(create.type === "GATEWAY" && create.config.verify).toEqual({
      ...probe,
      headers: { Authorization: "Bearer {{ secrets.LEGACY_KEY }}" },
    });
  });

  it("is refused on a GET or HEAD step: a read has nothing to verify", () => {
    for (const method of ["GET", "HEAD"]) {
      expect(errorsOf(withProbe(probe, { method, body: undefined }))).toEqual([{ pointer: at(), code: "verify-on-read" }]);
    }
  });

  it("requires a condition that is an expression, and compiles every probe expression", () => {
    const { condition: _condition, ...noCondition } = probe;
    expect(errorsOf(withProbe(noCondition))).toEqual([{ pointer: at("condition"), code: "required" }]);
    expect(errorsOf(withProbe({ ...probe, condition: "true" }))).toEqual([{ pointer: at("condition"), code: "invalid-format" }]);
    expect(errorsOf(withProbe({ ...probe, condition: "= $count(body.items" }))).toEqual([
      { pointer: at("condition"), code: "expression-syntax" },
    ]);
    expect(errorsOf(withProbe({ ...probe, query: { external_id: "= $nope(payload)" } }))).toEqual([
      { pointer: at("query", "external_id"), code: "unknown-function" },
    ]);
    expect(errorsOf(withProbe({ ...probe, url: "ftp://legacy/orders" }))).toEqual([{ pointer: at("url"), code: "invalid-url" }]);
    expect(errorsOf(withProbe({ ...probe, body: "= 1" }))).toEqual([{ pointer: at("body"), code: "unknown-key" }]);
  });

  it("follows the secrets rules of the step's own headers, and sends no Idempotency-Key", () => {
    expect(errorsOf(withProbe({ ...probe, headers: { Authorization: "= 'Bearer {{ secrets.LEGACY_KEY }}'" } }))).toEqual([
      { pointer: at("headers", "Authorization"), code: "secret-in-expression" },
    ]);
    expect(errorsOf(withProbe({ ...probe, url: `${LEGACY}?token={{ secrets.LEGACY_KEY }}` }))).toEqual([
      { pointer: at("url"), code: "secret-not-allowed-here" },
    ]);
    expect(errorsOf(withProbe({ ...probe, headers: { "Idempotency-Key": "= payload.order.id" } }))).toEqual([
      { pointer: at("headers", "Idempotency-Key"), code: "verify-key-header" },
    ]);
  });

  it("makes the step load what the probe's expressions read", () => {
    const spec = stepInputsOf(
      WorkflowDefinition.parse(withProbe({ ...probe, condition: "= $count(body.items) > 0 or steps.lookup.status = 404" })),
    );
    expect(spec.vertices.create).toEqual({ all: false, payload: true, steps: ["lookup"] });
  });
});
