import { describe, expect, it } from "vitest";
import { KEY_ALPHABETS } from "../../src/definitions/key-profiles";
import { evaluate } from "../../src/expressions/evaluate";
import { idempotencyKey } from "../../src/expressions/key-helpers";
import { keyShape, MIN_DIGEST_BITS } from "../../src/expressions/key-shape";
import { canonicalJson } from "../../src/lib/canonical-json";
import { sha256Hex } from "../../src/lib/crypto";
import { DEFAULT_KEY_CONSTRAINTS, type KeyConstraints } from "../../src/lib/key-constraints";

/**
 * Keys computed by `$idempotencyKey` before destination keys could be shaped (base 42e0cab),
 * hard-coded: a key that changes between versions is a double charge waiting to happen.
 */
const RECORDED: Array<[string, unknown[], string]> = [
  ["charge", ["A-1001"], "charge-9lfBWnlso-ftyyNW4DWSY0TWyiicIN9XEOpgIZ9l7E4"],
  ["charge", [1001], "charge-G6BxgNJRlLEEpCuRrSzvS_U7PZ9isKd_q1Auh_1kDRk"],
  ["ship", ["A-1001", { sku: "X", qty: 2 }], "ship-ATYNC5KVbDVy3ToNtIRX8068jSLsQPf1UHYSlfklQ6Y"],
  ["line.item:v1_x", [["a", "b"], null, true, 1.5], "line.item:v1_x-r9K6aj_WNYQgmd8-0ED-cFeypvm2Ax86JpuqmNTqywQ"],
  ["k", [{ b: 1, a: "é" }], "k-RfLGM0mbdKsa6iSo_36PR4dUU0HaWOHx-jR28CQZuKI"],
  ["p".repeat(64), ["long prefix"], `${"p".repeat(64)}-hADyd7Dlgt-wQ-C_yndhv71v8vXEZmrGnxa4A6dE2Bo`],
];

const constraints = (maxLength: number, alphabet: keyof typeof KEY_ALPHABETS): KeyConstraints => ({
  minLength: 1,
  maxLength,
  alphabet: KEY_ALPHABETS[alphabet],
});

describe("$idempotencyKey without a declaration is byte-for-byte the recorded keys", () => {
  it.each(RECORDED)("%s %j", async (prefix, parts, recorded) => {
    expect(await idempotencyKey(prefix, ...parts)).toBe(recorded);
    const source = `$idempotencyKey(${[prefix, ...parts].map((p) => JSON.stringify(p)).join(", ")})`;
    expect(await evaluate(source, {})).toBe(recorded);
    // Under the default constraints (the header form's, and Stripe's: 1–255 printable ASCII) every key fits: unchanged.
    expect(await evaluate(source, {}, {}, DEFAULT_KEY_CONSTRAINTS)).toBe(recorded);
  });
});

describe("$idempotencyKey in a key expression with constraints", () => {
  const recorded = RECORDED[0]![2];

  it("keeps the prefix and cuts the base64url digest so the key fills maxLength exactly", async () => {
    const key = await evaluate("$idempotencyKey('charge', 'A-1001')", {}, {}, constraints(40, "url-safe"));
    expect(key).toBe(recorded.slice(0, 40));
    expect(key).toHaveLength(40);
    expect(await evaluate("$idempotencyKey('charge', 'A-1001')", {}, {}, constraints(50, "printable-ascii"))).toBe(recorded);
  });

  it("an alphanumeric destination gets no separator and a lowercase hex digest", async () => {
    const hex = await sha256Hex(canonicalJson(["A-1001"]));
    const key = await evaluate("$idempotencyKey('charge', 'A-1001')", {}, {}, constraints(40, "alphanumeric"));
    expect(key).toBe(`charge${hex.slice(0, 34)}`);
    expect(await evaluate("$idempotencyKey('charge', 'A-1001')", {}, {}, constraints(100, "alphanumeric"))).toBe(`charge${hex}`);
  });

  it("shapes keys anywhere in the expression, and is the same on every evaluation", async () => {
    const source = "$map(['A-1001'], function($id) { $idempotencyKey('charge', $id) })";
    const first = await evaluate(source, {}, {}, constraints(40, "url-safe"));
    expect(first).toBe(recorded.slice(0, 40));
    expect(await evaluate(source, {}, {}, constraints(40, "url-safe"))).toBe(first);
  });

  it("an expression cannot shadow the constraints with a variable of the same name", async () => {
    const source = "($__idemflow_key_constraints := {'maxLength': 255}; $idempotencyKey('charge', 'A-1001'))";
    expect(await evaluate(source, {}, {}, constraints(40, "url-safe"))).toBe(recorded.slice(0, 40));
  });

  it("refuses a prefix that leaves fewer than 96 digest bits, or holds a character the destination refuses", async () => {
    await expect(evaluate("$idempotencyKey('a-much-longer-prefix-here', 'A')", {}, {}, constraints(40, "url-safe"))).rejects.toThrow(
      '$idempotencyKey: the prefix "a-much-longer-prefix-here" is too long for keys of at most 40 characters: ' +
        "the digest needs at least 16 base64url characters (96 bits); use a prefix of at most 23",
    );
    await expect(evaluate("$idempotencyKey('charge-v1', 'A')", {}, {}, constraints(40, "alphanumeric"))).rejects.toThrow(
      '$idempotencyKey: the prefix "charge-v1" holds characters the destination refuses (it accepts letters and digits only)',
    );
    await expect(evaluate("$idempotencyKey('line.item', 'A')", {}, {}, constraints(64, "url-safe"))).rejects.toThrow(/holds characters/);
  });

  it("reports the bits it keeps (what the collision bound is computed from)", () => {
    expect(keyShape("charge", constraints(40, "url-safe"))).toEqual({
      shape: { separator: "-", encoding: "base64url", digestChars: 33, bits: 198 },
    });
    expect(keyShape("charge", constraints(40, "alphanumeric"))).toEqual({
      shape: { separator: "", encoding: "hex", digestChars: 34, bits: 136 },
    });
    expect(keyShape("charge", constraints(255, "printable-ascii"))).toEqual({
      shape: { separator: "-", encoding: "base64url", digestChars: 43, bits: 256 },
    });
    expect(keyShape("c", constraints(1 + 1 + 16, "url-safe"))).toEqual({
      shape: { separator: "-", encoding: "base64url", digestChars: 16, bits: MIN_DIGEST_BITS },
    });
    expect(keyShape("c", constraints(1 + 1 + 15, "url-safe"))).toHaveProperty("error");
  });
});
