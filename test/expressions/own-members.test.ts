/**
 * A definition's literal objects evaluated member by member (`evaluateValue`): a member named
 * `__proto__` (JSON.parse makes it an own member; a stored definition is read that way) stays an
 * own member of the result, never the result's prototype.
 */
import { describe, expect, it } from "vitest";
import { evaluateValue } from "../../src/expressions/evaluate";

describe("evaluateValue on members named like the prototype", () => {
  it.each(["__proto__", "constructor", "prototype", "toString"])("keeps %s as an own member", async (name) => {
    const literal = JSON.parse(`{"amount": "= payload.total", "${name}": {"polluted": "= payload.total"}}`) as unknown;
    const out = (await evaluateValue(literal, { payload: { total: 5 } })) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(JSON.stringify(out)).toBe(`{"amount":5,"${name}":{"polluted":5}}`);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
