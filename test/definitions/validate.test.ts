/// <reference types="vite/client" />
import { describe, expect, it } from "vitest";
import { validateDefinition, type ValidationError } from "../../src/definitions/validate";
import { VERTEX_TYPES } from "../../src/definitions/schema";
import { resolveConnectors } from "../../src/connectors/resolve";
import { ConnectorDefinition, type StoredConnector } from "../../src/connectors/schema";

// The definitions only: a workflow's scenario file (`<id>.test.json`, docs/testing-workflows.md) is not one.
const examples = import.meta.glob<{ default: unknown }>(["../../workflows/*.json", "!../../workflows/*.test.json"], { eager: true });
// An example may go through the demo's connectors (docs/connectors.md): resolved as its save resolves it.
const connectorFiles = import.meta.glob<{ default: unknown }>("../../connectors/*.json", { eager: true });
const connectors = new Map<string, StoredConnector>(
  Object.values(connectorFiles).map(({ default: raw }) => {
    const c = ConnectorDefinition.parse(raw);
    return [c.name, { workspace: "dev", name: c.name, version: "0".repeat(64), definition: c, createdAt: 0 }];
  }),
);
const fixtures = import.meta.glob<{ default: unknown }>("../fixtures/workflows/*.json", { eager: true });

function fileName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1, -".json".length);
}

function errorsOf(input: unknown, options?: { crons?: string[] }): ValidationError[] {
  const result = validateDefinition(input, options);
  return result.ok ? [] : result.errors;
}

const validFixtures = Object.entries(fixtures).filter(([path]) => fileName(path).startsWith("valid-"));
const invalidFixtures = Object.entries(fixtures).filter(([path]) => fileName(path).startsWith("invalid--"));

describe("validateDefinition on files", () => {
  it("finds the example workflows and the fixtures", () => {
    expect(Object.keys(examples).length).toBeGreaterThan(0);
    expect(validFixtures.length).toBe(VERTEX_TYPES.length); // one per vertex type
    expect(invalidFixtures.length).toBeGreaterThanOrEqual(25);
  });

  it.each(Object.entries(examples).map(([path, mod]) => [fileName(path), mod.default]))(
    "accepts the example workflows/%s.json",
    (_name, doc) => {
      const resolution = resolveConnectors(doc, connectors);
      expect(resolution.errors).toEqual([]);
      expect(errorsOf(resolution.document)).toEqual([]);
    },
  );

  it.each(validFixtures.map(([path, mod]) => [fileName(path), mod.default]))("accepts the fixture %s", (_name, doc) => {
    expect(errorsOf(doc)).toEqual([]);
  });

  // Each invalid fixture is named after the one rule it breaks: it must fail for that rule only.
  it.each(invalidFixtures.map(([path, mod]) => [fileName(path).slice("invalid--".length), mod.default]))(
    "rejects the fixture that breaks %s, and only for that rule",
    (code, doc) => {
      const errors = errorsOf(doc);
      expect(errors.length).toBeGreaterThan(0);
      expect(new Set(errors.map((e) => e.code))).toEqual(new Set([code]));
      for (const error of errors) {
        expect(error.pointer).toMatch(/^(\/[^/]+)*$/);
        expect(error.message.length).toBeGreaterThan(20);
      }
    },
  );
});

function minimal(overrides: Record<string, unknown> = {}) {
  return {
    id: "minimal",
    vertices: [
      { id: "received", type: "ENTRY_POINT" },
      { id: "t", type: "TRANSFORM", config: { output: "= payload" } },
    ],
    edges: [{ from: "received", to: "t" }],
    ...overrides,
  };
}

describe("validateDefinition", () => {
  it("returns the parsed definition with defaults filled in and without $schema", () => {
    const result = validateDefinition({ ...minimal(), $schema: "../schema/workflow.schema.json" });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.definition).not.toHaveProperty("$schema");
    expect(result.definition.vertices[0]).toEqual({ id: "received", type: "ENTRY_POINT", config: {} });
  });

  it("accepts an ENTRY_POINT-only workflow", () => {
    expect(errorsOf({ id: "lonely", vertices: [{ id: "received", type: "ENTRY_POINT" }] })).toEqual([]);
  });

  it("rejects a document that is not an object with one error at the root", () => {
    expect(errorsOf([1, 2])).toEqual([expect.objectContaining({ pointer: "", code: "invalid-type" })]);
    expect(errorsOf(null)).toEqual([expect.objectContaining({ pointer: "" })]);
  });

  it("points at each unknown key, at any depth", () => {
    const doc = minimal({ colour: "blue" });
    (doc.vertices[1] as { config: Record<string, unknown> }).config.extra = 1;
    const errors = errorsOf(doc);
    expect(errors.map((e) => [e.pointer, e.code])).toEqual([
      ["/vertices/1/config/extra", "unknown-key"],
      ["/colour", "unknown-key"],
    ]);
  });

  it("escapes `/` and `~` in pointers (RFC 6901)", () => {
    const doc = minimal();
    (doc.vertices[1] as { config: Record<string, unknown> }).config["a/b~c"] = 1;
    expect(errorsOf(doc)[0]?.pointer).toBe("/vertices/1/config/a~1b~0c");
  });

  it("reports a syntax error with its position", () => {
    const doc = minimal({ edges: [{ from: "received", to: "t", when: "= payload.total >" }] });
    const [error] = errorsOf(doc);
    expect(error).toMatchObject({ pointer: "/edges/0/when", code: "expression-syntax" });
    expect(error?.message).toMatch(/position \d+/);
  });

  it("requires `when` to be an expression", () => {
    const errors = errorsOf(minimal({ edges: [{ from: "received", to: "t", when: "payload.total > 1" }] }));
    expect(errors.map((e) => e.pointer)).toEqual(["/edges/0/when"]);
  });

  it("accepts functions bound in the expression and the key helpers", () => {
    const doc = minimal();
    (doc.vertices[1] as { config: Record<string, unknown> }).config.output =
      "= ($double := function($n){ $n * 2 }; { 'd': $double(payload.n), 'k': $sha256(payload), 'm': $map([1,2], $double) })";
    expect(errorsOf(doc)).toEqual([]);
  });

  it("checks idempotencyFields paths and durations", () => {
    const errors = errorsOf({
      id: "fields",
      vertices: [
        {
          id: "received",
          type: "ENTRY_POINT",
          config: { idempotencyFields: ["order.id", "order..id", "= payload.x"], dedupeWindow: "a day" },
        },
      ],
    });
    expect(errors.map((e) => e.pointer)).toEqual([
      "/vertices/0/config/idempotencyFields/1",
      "/vertices/0/config/idempotencyFields/2",
      "/vertices/0/config/dedupeWindow",
    ]);
    expect(
      errorsOf({
        id: "fields",
        vertices: [{ id: "r", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", dedupeWindow: "36h" } }],
      }),
    ).toEqual([]);
  });

  it("rejects a zero dedupe window, which would expire every identity as it is written", () => {
    for (const dedupeWindow of ["0s", "0ms", 0]) {
      const errors = errorsOf({ id: "zero", vertices: [{ id: "r", type: "ENTRY_POINT", config: { dedupeWindow } }] });
      expect(errors.map((e) => e.pointer)).toEqual(["/vertices/0/config/dedupeWindow"]);
    }
  });

  it("accepts a schedule listed in the configured crons and rejects one that is not, saying where to add it", () => {
    const doc = { id: "nightly", vertices: [{ id: "tick", type: "ENTRY_POINT", config: { schedule: "0 3 * * *" } }] };
    expect(errorsOf(doc, { crons: ["0 3 * * *"] })).toEqual([]);
    expect(errorsOf(doc)).toEqual([]); // crons unknown: shape only
    const [error] = errorsOf(doc, { crons: ["* * * * *"] });
    expect(error).toMatchObject({ pointer: "/vertices/0/config/schedule", code: "schedule-not-configured" });
    expect(error?.message).toContain("wrangler.toml [triggers] crons");
  });

  it("allows a secret in a literal header and in the webhook signature, nowhere else", () => {
    const gateway = (headers: Record<string, string>, extra: Record<string, unknown> = {}) => ({
      id: "secrets",
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: { webhook: { signature: { secret: "{{ secrets.WEBHOOK_SECRET }}" } } } },
        { id: "call", type: "GATEWAY", config: { method: "POST", url: "http://localhost:8788/x", headers, ...extra } },
      ],
      edges: [{ from: "received", to: "call" }],
    });
    const key = "= $idempotencyKey('x', payload.id)";
    expect(errorsOf(gateway({ "Idempotency-Key": key, "X-Api-Key": "{{secrets.API_KEY}}" }))).toEqual([]);
    expect(
      errorsOf(gateway({ "Idempotency-Key": key }, { body: { token: "{{ secrets.API_KEY }}" } })).map((e) => [e.pointer, e.code]),
    ).toEqual([["/vertices/1/config/body/token", "secret-not-allowed-here"]]);
    expect(errorsOf(gateway({ "Idempotency-Key": key }, { query: { k: "{{ secrets.API_KEY }}" } })).map((e) => e.code)).toEqual([
      "secret-not-allowed-here",
    ]);
  });

  it("refuses a partial application of a key helper with more arguments than it declares (JSONata would drop them)", () => {
    const transform = (output: string) => ({
      id: "partials",
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        { id: "keys", type: "TRANSFORM", config: { output } },
      ],
      edges: [{ from: "received", to: "keys" }],
    });
    const [error, ...rest] = errorsOf(transform("= $map(payload.items, $idempotencyKey('line', payload.order.id, ?))"));
    expect(rest).toEqual([]);
    expect(error).toMatchObject({ pointer: "/vertices/1/config/output", code: "helper-partial-arguments" });
    expect(error?.message).toMatch(/at most 2 argument.*got 3.*function\(\$v\)/);
    expect(errorsOf(transform("= $sha256(?, 1)"))[0]?.code).toBe("helper-partial-arguments");
    expect(errorsOf(transform("= $map(payload.items, $idempotencyKey('line', ?))"))).toEqual([]);
    expect(errorsOf(transform("= $map(payload.items, function($v){ $idempotencyKey('line', payload.order.id, $v) })"))).toEqual([]);
  });

  it("reports every error of a definition with 12 distinct errors", () => {
    const doc = {
      $schema: "../schema/workflow.schema.json",
      id: "twelve errors", // 1 invalid id
      colour: "blue", // 2 unknown key
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: { schedule: "hourly" } }, // 3 invalid cron
        {
          id: "charge",
          type: "GATEWAY",
          config: {
            method: "GET",
            url: "not a url", // 4 invalid url
            headers: {
              "idempotency-KEY": "= 'charge-' & $string($now())", // 5 unstable key
              Authorization: "Bearer {{ secrets.bad-name }}", // 6 invalid secret name
            },
            body: { q: "= payload.(" }, // 7 body on GET, 8 syntax error
          },
        },
        { id: "charge", type: "TRANSFORM", config: { output: 1 } }, // 9 duplicate id
        { id: "island", type: "TRANSFORM", config: { output: "= $frobnicate()" } }, // 10 unreachable, 11 unknown function
      ],
      edges: [
        { from: "received", to: "charge" },
        { from: "charge", to: "received" }, // 12 edge into the entry
      ],
    };
    const errors = errorsOf(doc);
    expect(errors.map((e) => e.code).sort()).toEqual(
      [
        "invalid-format",
        "unknown-key",
        "invalid-cron",
        "invalid-url",
        "idempotency-key-unstable",
        "secret-name-invalid",
        "body-not-allowed",
        "expression-syntax",
        "duplicate-vertex-id",
        "unreachable-vertex",
        "unknown-function",
        "edge-into-entry-point",
      ].sort(),
    );
    expect(errors).toHaveLength(12);
    expect(new Set(errors.map((e) => `${e.pointer} ${e.code}`)).size).toBe(12);
  });
});
