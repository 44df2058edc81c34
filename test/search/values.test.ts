/**
 * What the search indexes of an identity, and how it reads a query (src/ingress/identity-values.ts):
 * the business values of a fields or client identity (none of the others), within the bounds, each
 * once; normalised by canonical JSON as the identity is; the query's readings.
 */
import { describe, expect, it } from "vitest";
import {
  businessValuesOf,
  identitySearchHashes,
  identityValueHash,
  identityValueHashes,
  MAX_INDEXED_VALUES,
} from "../../src/ingress/identity-values";
import { setOwnMember } from "../../src/lib/own-member";

const material = (entries: Array<[string, unknown]>) => {
  const record: Record<string, unknown> = {};
  for (const [path, value] of entries) setOwnMember(record, path, value);
  return record;
};

describe("the values an identity is indexed by", () => {
  it("a fields identity: each field's value, in the order listed, read as own members (`__proto__` too)", () => {
    expect(
      businessValuesOf(
        "fields",
        material([
          ["order.id", "A-1"],
          ["__proto__", 7],
          ["constructor", { a: 1 }],
        ]),
      ),
    ).toEqual(["A-1", 7, { a: 1 }]);
  });

  it("a client identity: its id; content and schedule identities: nothing", async () => {
    expect(businessValuesOf("client", "order-77")).toEqual(["order-77"]);
    expect(businessValuesOf("content", ["json", { order: { id: "A-1" } }])).toEqual([]);
    expect(businessValuesOf("schedule", ["0 9 * * *", 1])).toEqual([]);
    expect(await identityValueHashes("w", { kind: "content", material: ["json", { id: 1 }] })).toEqual([]);
    expect(await identityValueHashes("w", { kind: "forced" })).toEqual([]);
  });

  it('normalised like the identity: 1001 and 1001.0 one value, 1001 and "1001" two; equal values once', async () => {
    const a = await identityValueHashes("w", {
      kind: "fields",
      material: material([
        ["a", 1001],
        ["b", 1001.0],
        ["c", "1001"],
      ]),
    });
    expect(a).toEqual([await identityValueHash("w", 1001), await identityValueHash("w", "1001")]);
    expect(await identityValueHash("w", { x: 1, y: 2 })).toBe(await identityValueHash("w", JSON.parse('{"y":2,"x":1}')));
  });

  it("bounded: a value over 512 bytes of canonical JSON is not indexed, and at most 16 values are", async () => {
    expect(await identityValueHashes("w", { kind: "fields", material: material([["a", "é".repeat(256)]]) })).toEqual([]);
    expect(await identityValueHashes("w", { kind: "fields", material: material([["a", "x".repeat(510)]]) })).toHaveLength(1);
    const many = material(Array.from({ length: 40 }, (_, i): [string, unknown] => [`f${i}`, `v${i}`]));
    const hashes = await identityValueHashes("w", { kind: "fields", material: many });
    expect(hashes).toHaveLength(MAX_INDEXED_VALUES);
    expect(hashes[0]).toBe(await identityValueHash("w", "v0"));
  });
});

describe("how ?identity= is read", () => {
  const hashes = (text: string) => identitySearchHashes("w", text);
  const of = (...values: unknown[]) => Promise.all(values.map((v) => identityValueHash("w", v)));

  it.each([
    ["A-1001", ["A-1001"]],
    ["1001", ["1001", 1001]],
    ["1001.0", ["1001.0", 1001]],
    ['"1001"', ["1001"]],
    ["true", ["true", true]],
    ["null", ["null"]],
    ["12345678901234567891", ["12345678901234567891"]],
    ['{"b":1,"a":2}', ['{"b":1,"a":2}', { a: 2, b: 1 }]],
    ["__proto__", ["__proto__"]],
  ])("%s reads as %j", async (text, values) => {
    expect(await hashes(text)).toEqual(await of(...values));
  });
});
