/**
 * `idempotencyFields` naming a payload member `__proto__` (a valid dot path; the payload's
 * JSON.parse makes it an own member): its value is part of the identity material, so two
 * deliveries with different values are two identities, not one.
 */
import { describe, expect, it } from "vitest";
import { selectFields } from "../../src/ingress/material";
import type { TriggerBody } from "../../src/ingress/payload";
import { canonicalJson } from "../../src/lib/canonical-json";

const body = (json: string) => ({ raw: new TextEncoder().encode(json), isJson: true, payload: JSON.parse(json) as unknown }) as TriggerBody;

describe("selectFields with a path named like the prototype", () => {
  it.each(["__proto__", "constructor", "toString"])("keeps %s's value as an own member of the material", (path) => {
    const a = selectFields(body(`{"${path}": {"id": "A"}}`), [path]);
    const b = selectFields(body(`{"${path}": {"id": "B"}}`), [path]);
    expect(canonicalJson(a)).toBe(`{"${path}":{"id":"A"}}`);
    expect(canonicalJson(a)).not.toBe(canonicalJson(b));
    expect(Object.getPrototypeOf(a)).toBe(Object.prototype);
  });
});
