import { describe, expect, it } from "vitest";
import { deriveIdentity, identityTuple } from "../../src/ingress/identity";
import { identityMaterial, valueAtPath } from "../../src/ingress/material";
import { parseTriggerBody } from "../../src/ingress/payload";
import { canonicalJson } from "../../src/lib/canonical-json";
import { utf8 } from "../../src/lib/crypto";

const base = {
  workspace: "dev",
  workflowId: "wf",
  entryVertexId: "in",
  kind: "client" as const,
  material: "m" as unknown,
  scope: "production" as const,
};

describe("execution identity", () => {
  it("gives different ids to tuples whose plain concatenations collide", async () => {
    // ("ab", "c") vs ("a", "bc") — and the same with a separator, which a value can contain.
    type Input = Parameters<typeof deriveIdentity>[0];
    const cases: Array<[Input, Input, string]> = [
      [{ ...base, workspace: "ab", workflowId: "c" }, { ...base, workspace: "a", workflowId: "bc" }, ""],
      [{ ...base, workflowId: "ab", entryVertexId: "c" }, { ...base, workflowId: "a", entryVertexId: "bc" }, ""],
      [{ ...base, kind: "fields", material: ["ab", "c"] }, { ...base, kind: "fields", material: ["a", "bc"] }, ""],
      [{ ...base, workspace: "a|b", workflowId: "c" }, { ...base, workspace: "a", workflowId: "b|c" }, "|"],
      [{ ...base, workspace: 'a","b', workflowId: "c" }, { ...base, workspace: "a", workflowId: 'b","c' }, '","'],
    ];
    for (const [left, right, separator] of cases) {
      const naive = (i: Input) => identityTuple(i).flat().join(separator);
      expect(naive(left)).toBe(naive(right));
      expect(await deriveIdentity(left)).not.toBe(await deriveIdentity(right));
    }
  });

  it("is a SHA-256 hex of the canonical JSON of the tuple", async () => {
    const id = await deriveIdentity({ ...base, material: "k" });
    expect(id).toMatch(/^[0-9a-f]{64}$/);
    expect(canonicalJson(identityTuple({ ...base, material: "k" }))).toBe('["dev","wf","in","client","k"]');
  });

  it("scopes non-forced test runs apart from production", async () => {
    const production = await deriveIdentity({ ...base, material: "k" });
    const test = await deriveIdentity({ ...base, material: "k", scope: "test" });
    expect(production).not.toBe(test);
  });

  it("gives test runs and stream runs scopes of their own", async () => {
    const test = await deriveIdentity({ ...base, material: "k", scope: "test" });
    const stream = await deriveIdentity({ ...base, material: "k", scope: "stream" });
    expect(stream).not.toBe(test);
    expect(stream).not.toBe(await deriveIdentity({ ...base, material: "k" }));
  });

  it("separates the identity kinds even for equal material", async () => {
    expect(await deriveIdentity({ ...base, kind: "client", material: "k" })).not.toBe(
      await deriveIdentity({ ...base, kind: "fields", material: "k" }),
    );
  });
});

describe("identity material", () => {
  const json = (v: unknown) => parseTriggerBody(utf8(JSON.stringify(v)), "application/json");

  it("follows the precedence client > fields > content", async () => {
    const body = json({ order: { id: "A" } });
    expect((await identityMaterial({ clientIdempotencyId: "c", idempotencyFields: "order.id", body })).kind).toBe("client");
    expect(await identityMaterial({ clientIdempotencyId: undefined, idempotencyFields: "order.id", body })).toEqual({
      kind: "fields",
      material: { "order.id": "A" },
    });
    expect(await identityMaterial({ clientIdempotencyId: undefined, idempotencyFields: undefined, body })).toEqual({
      kind: "content",
      material: ["json", { order: { id: "A" } }],
    });
  });

  it("walks dot paths through objects and arrays", () => {
    const payload = { order: { id: 0, items: [{ sku: "s1" }] }, flag: false };
    expect(valueAtPath(payload, "order.id")).toBe(0);
    expect(valueAtPath(payload, "order.items.0.sku")).toBe("s1");
    expect(valueAtPath(payload, "flag")).toBe(false);
    expect(valueAtPath(payload, "order.missing")).toBeUndefined();
    expect(valueAtPath(payload, "order.id.deeper")).toBeUndefined();
    expect(valueAtPath(payload, "order.items.x")).toBeUndefined();
    expect(valueAtPath({ "a.b": 1 }, "toString")).toBeUndefined();
  });

  it("hashes a non-JSON body's raw bytes, tagged apart from JSON", async () => {
    const raw = parseTriggerBody(utf8('"x"'), "text/plain");
    const parsed = parseTriggerBody(utf8('"x"'), "application/json");
    const a = await identityMaterial({ clientIdempotencyId: undefined, idempotencyFields: undefined, body: raw });
    const b = await identityMaterial({ clientIdempotencyId: undefined, idempotencyFields: undefined, body: parsed });
    expect(a.material).toEqual(["bytes", expect.stringMatching(/^[0-9a-f]{64}$/)]);
    expect(b.material).toEqual(["json", "x"]);
  });
});
