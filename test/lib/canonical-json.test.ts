import { describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/lib/canonical-json";

function fromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

describe("canonicalJson (RFC 8785)", () => {
  it("matches the RFC's section 3.2.2 example", () => {
    const input = JSON.parse(
      '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],' +
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}',
    );
    expect(canonicalJson(input)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it("sorts members by UTF-16 code units as in the RFC's section 3.2.3 example", () => {
    const input = JSON.parse(
      '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One",' +
        ' "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control", "\\u00f6": "Latin Small Letter O With Diaeresis"}',
    );
    // (Object.keys would put "1" first: integer-like keys come first in JS objects, not in JCS.)
    expect(canonicalJson(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it.each([
    ["0000000000000000", "0"],
    ["8000000000000000", "0"],
    ["0000000000000001", "5e-324"],
    ["8000000000000001", "-5e-324"],
    ["7fefffffffffffff", "1.7976931348623157e+308"],
    ["ffefffffffffffff", "-1.7976931348623157e+308"],
    ["4340000000000000", "9007199254740992"],
    ["c340000000000000", "-9007199254740992"],
    ["4430000000000000", "295147905179352830000"],
    ["44b52d02c7e14af5", "9.999999999999997e+22"],
    ["44b52d02c7e14af6", "1e+23"],
    ["44b52d02c7e14af7", "1.0000000000000001e+23"],
    ["444b1ae4d6e2ef4e", "999999999999999700000"],
    ["444b1ae4d6e2ef4f", "999999999999999900000"],
    ["444b1ae4d6e2ef50", "1e+21"],
    ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
    ["3eb0c6f7a0b5ed8d", "0.000001"],
    ["41b3de4355555553", "333333333.3333332"],
    ["41b3de4355555554", "333333333.33333325"],
    ["41b3de4355555555", "333333333.3333333"],
    ["41b3de4355555556", "333333333.3333334"],
    ["41b3de4355555557", "333333333.33333343"],
    ["becbf647612f3696", "-0.0000033333333333333333"],
    ["43143ff3c1cb0959", "1424953923781206.2"],
  ])("serialises the IEEE 754 value %s as %s (appendix B)", (bits, expected) => {
    expect(canonicalJson(fromBits(bits))).toBe(expected);
  });

  it.each([NaN, Infinity, -Infinity])("refuses %s, which JSON cannot represent", (value) => {
    expect(() => canonicalJson({ a: value })).toThrow(TypeError);
  });

  it("names where a value JSON cannot hold sits", () => {
    expect(() => canonicalJson({ a: [1, { b: NaN }] })).toThrow("$.a[1].b: NaN cannot be represented in JSON");
    expect(() => canonicalJson({ z: 1, f: [() => 1] })).toThrow("$.f[0]: a function cannot be represented in JSON");
  });

  it("writes absent array elements as null and leaves undefined members out, as JSON.stringify does", () => {
    // eslint-disable-next-line no-sparse-arrays -- the hole is the point
    const value = { b: [1, undefined, , 3], a: undefined, c: {} };
    expect(canonicalJson(value)).toBe('{"b":[1,null,null,3],"c":{}}');
    expect(canonicalJson(value)).toBe(JSON.stringify(value));
  });

  it("serialises values nested 20,000 levels deep without overflowing the call stack", () => {
    const depth = 20_000;
    let array: unknown = 1;
    let object: unknown = "x";
    for (let i = 0; i < depth; i++) {
      array = [array];
      object = { b: object, a: i };
    }
    expect(canonicalJson(array)).toBe(`${"[".repeat(depth)}1${"]".repeat(depth)}`);
    const text = canonicalJson(object);
    expect(text.startsWith(`{"a":${depth - 1},"b":{"a":${depth - 2},"b":`)).toBe(true);
    expect(text.endsWith(`{"a":0,"b":"x"}${"}".repeat(depth - 1)}`)).toBe(true);
  });

  it("ignores whitespace and member order, keeps array order", () => {
    expect(canonicalJson(JSON.parse('{ "b" : [2, 1], "a" : { "y": 1, "x": 2 } }'))).toBe('{"a":{"x":2,"y":1},"b":[2,1]}');
  });
});
