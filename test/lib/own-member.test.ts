/**
 * The one test pattern for members named by user data (src/lib/own-member.ts): every function
 * with the names that reach the prototype chain (`__proto__`, `constructor`, `prototype`) and a
 * built-in method's name (`toString`). After each case, `Object.prototype` is unchanged.
 */
import { afterEach, describe, expect, it } from "vitest";
import { hasOwnMember, isJsonObject, ownMember, ownRecord, PROTOTYPE_NAMES, setOwnMember } from "../../src/lib/own-member";

const NAMES = ["__proto__", "constructor", "prototype", "toString"] as const;

afterEach(() => {
  // Nothing leaked into every object of the isolate.
  expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain("polluted");
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
});

describe.each(NAMES)("a member named %s", (name) => {
  it("hasOwnMember: false on a plain object and on a null-prototype one, true once it is own", () => {
    expect(hasOwnMember({}, name)).toBe(false);
    expect(hasOwnMember(ownRecord(), name)).toBe(false);
    expect(hasOwnMember(JSON.parse(`{"${name}": 1}`), name)).toBe(true);
    expect(hasOwnMember(null, name)).toBe(false);
    expect(hasOwnMember("text", name)).toBe(false);
  });

  it("ownMember: undefined unless own (never the prototype, nor a built-in function)", () => {
    expect(ownMember({}, name)).toBeUndefined();
    expect(ownMember([], name)).toBeUndefined();
    expect(ownMember(ownRecord(), name)).toBeUndefined();
    expect(ownMember(JSON.parse(`{"${name}": {"polluted": 1}}`), name)).toEqual({ polluted: 1 });
  });

  it("setOwnMember: an own, enumerable data member that JSON keeps; the prototype is untouched", () => {
    const record: Record<string, unknown> = {};
    setOwnMember(record, name, { polluted: 1 });
    expect(Object.getPrototypeOf(record)).toBe(Object.prototype);
    expect(Object.keys(record)).toEqual([name]);
    expect(ownMember(record, name)).toEqual({ polluted: 1 });
    expect(JSON.stringify(record)).toBe(`{"${name}":{"polluted":1}}`);
    setOwnMember(record, name, "again"); // writable: a second write replaces it
    expect(ownMember(record, name)).toBe("again");
  });

  it("ownRecord: plain assignment creates an own member that entries, JSON and Headers see", () => {
    const record = ownRecord<string>();
    record[name] = "k-1";
    expect(Object.getPrototypeOf(record)).toBeNull();
    expect(Object.entries(record)).toEqual([[name, "k-1"]]);
    expect(JSON.stringify(record)).toBe(`{"${name}":"k-1"}`);
    expect(new Headers(record).get(name)).toBe("k-1");
    expect(hasOwnMember(record, name)).toBe(true);
  });

  it("PROTOTYPE_NAMES holds the names that reach the prototype chain, not a method's name", () => {
    expect(PROTOTYPE_NAMES.has(name)).toBe(name !== "toString");
  });
});

describe("isJsonObject", () => {
  it("is true for objects only, whatever their prototype", () => {
    expect(isJsonObject({})).toBe(true);
    expect(isJsonObject(ownRecord())).toBe(true);
    expect(isJsonObject([])).toBe(false);
    expect(isJsonObject(null)).toBe(false);
    expect(isJsonObject("{}")).toBe(false);
  });
});
