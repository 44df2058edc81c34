import { describe, expect, it } from "vitest";
import { findUnsafeNumber, findUnsafeNumberLiteral, isExactNumber } from "../../src/lib/json-numbers";

const scan = (text: string) => {
  JSON.parse(text); // the scanner's precondition: text JSON.parse accepts
  return findUnsafeNumberLiteral(text);
};

describe("the number rule", () => {
  it("accepts finite numbers up to 2^53 - 1 in magnitude, fractions included, and nothing beyond", () => {
    for (const n of [0, -0, 1, 0.1, 1.5, -2e-3, 1e-300, 4503599627370495.5, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER]) {
      expect(isExactNumber(n), String(n)).toBe(true);
    }
    for (const n of [Number.MAX_SAFE_INTEGER + 1, -(Number.MAX_SAFE_INTEGER + 1), 1e20, 1.5e300, Infinity, -Infinity, NaN]) {
      expect(isExactNumber(n), String(n)).toBe(false);
    }
  });
});

describe("findUnsafeNumberLiteral (raw JSON text)", () => {
  it("accepts MAX_SAFE_INTEGER, fractions, small exponents and 1.0", () => {
    for (const text of [
      `${Number.MAX_SAFE_INTEGER}`,
      `-${Number.MAX_SAFE_INTEGER}`,
      "9007199254740991.0",
      "9007199254740991.2", // a fraction: it parses to MAX_SAFE_INTEGER
      '{"a":0.1,"b":[1.0,-0,1e-7,1E2,-2.5e+3,4503599627370495.5,0.12345678901234567891]}',
      "1e15",
      "9.007199254740991e15",
      "123456789012345",
    ]) {
      expect(scan(text), text).toBeUndefined();
    }
  });

  it("refuses an integer beyond the safe range whatever its spelling, and overflow, naming the literal as sent", () => {
    const cases: Array<[string, string]> = [
      ["9007199254740992", "9007199254740992"],
      ["-9007199254740992", "-9007199254740992"],
      ["12345678901234567891", "12345678901234567891"],
      ["1e20", "1e20"],
      ["1E+16", "1E+16"],
      ["-9.1e15", "-9.1e15"],
      ["9007199254740991.5", "9007199254740991.5"], // rounds to 2^53
      ["1e400", "1e400"],
      ["-1e999", "-1e999"],
      ["123456789012345678901234567890.5e-3", "123456789012345678901234567890.5e-3"],
    ];
    for (const [text, literal] of cases) expect(scan(text), text).toEqual({ pointer: "", literal });
  });

  it("names the JSON Pointer through objects and nested arrays", () => {
    expect(scan('{"order":{"id":12345678901234567891}}')).toEqual({ pointer: "/order/id", literal: "12345678901234567891" });
    expect(scan('{"a":[1,[2,3,[4,1e400]]]}')).toEqual({ pointer: "/a/1/2/1", literal: "1e400" });
    // Closing containers and commas put the pointer back on the right member.
    expect(scan('{"a":[1,{"b":2}],"c":{"d":[]},"e":[0,{"f":"x"},1e20]}')?.pointer).toBe("/e/2");
    expect(scan('[[],{},[{}],{"x":[1,2]},-1e400]')?.pointer).toBe("/4");
    // RFC 6901 escapes, decoded member names, the empty name.
    expect(scan('{"a/b~c":{"":[1e20]}}')?.pointer).toBe("/a~1b~0c//0");
    expect(scan('{"q\\"x\\\\":1e20}')?.pointer).toBe('/q"x\\');
    expect(scan('{"\\u00e9":1e20}')?.pointer).toBe("/é");
  });

  it("never reads digits inside strings (values, names, escaped quotes, trailing backslashes) as numbers", () => {
    for (const text of [
      '"12345678901234567891"',
      '{"id":"12345678901234567891","h":"3e5a9f","x":"1e400"}',
      '{"12345678901234567891":1,"1e400":[2]}',
      '{"a":"say \\"12345678901234567891\\" and 1e400"}',
      '{"a":"ends with a backslash \\\\","b":"9007199254740993"}',
      '["\\\\\\"1e400\\\\\\"", "\\\\", "\\"", 5]',
    ]) {
      expect(scan(text), text).toBeUndefined();
    }
    // The value after a string that ends in escaped backslashes is still seen.
    expect(scan('{"a":"\\\\\\\\","b":1e20}')).toEqual({ pointer: "/b", literal: "1e20" });
    expect(scan('{"a":"\\"","b":[12345678901234567891]}')?.pointer).toBe("/b/0");
  });

  it("agrees with the value walk on the parsed document", () => {
    // Random documents over a pool of numbers (some unsafe) and awkward strings. Member names
    // are never integer-like, so text order and Object.keys order coincide.
    const numbers = ["0", "-1", "0.5", "1e-9", "9007199254740991", "9007199254740992", "1e21", "1e400", "-12345678901234567891", "3.25E2"];
    const strings = ['"1e400"', '"a\\"1e20\\""', '"\\\\"', '""', '"12345678901234567891"'];
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const build = (depth: number): string => {
      const pick = random(depth > 3 ? 2 : 4);
      if (pick === 0) return numbers[random(random(3) === 0 ? numbers.length : 5)]!;
      if (pick === 1) return strings[random(strings.length)]!;
      const items = Array.from({ length: random(4) }, () => build(depth + 1));
      if (pick === 2) return `[${items.join(",")}]`;
      return `{${items.map((item, i) => `"k${i}/${random(9)}~":${item}`).join(",")}}`;
    };
    let refused = 0;
    for (let i = 0; i < 500; i++) {
      const text = build(0);
      const fromText = scan(text);
      const fromValue = findUnsafeNumber(JSON.parse(text));
      expect(fromText?.pointer, text).toBe(fromValue?.pointer);
      if (fromText) refused++;
    }
    expect(refused).toBeGreaterThan(20);
    expect(refused).toBeLessThan(480);
  });

  it("scans 1 MiB bodies in linear time, also when the quick pre-check cannot clear them", () => {
    const items = Array.from({ length: 9000 }, (_, i) => ({
      id: i * 7919,
      sha: "3e5a9f00c1",
      note: `n"${i}\\`,
      v: [1.5, -2e-3, 123456789012345],
    }));
    // Each body with the pointer the scan must find in it (`undefined`: none).
    const bodies: Array<[string, string | undefined]> = [
      // eslint-disable-next-line no-loss-of-precision -- the scanner reads the text; the literal is never read as a number
      [JSON.stringify({ items, last: 12345678901234567891 }), "/last"], // found at the very end
      [JSON.stringify({ items: items.map((item) => ({ ...item, sha: "ab" })) }), undefined], // cleared by the pre-check
      [`"${"\\\\".repeat(500_000)}"`, undefined], // a long run of escaped backslashes
      [`${"[".repeat(200_000)}1e400${"]".repeat(200_000)}`, "/0".repeat(200_000)], // deep nesting
    ];
    for (const [text, pointer] of bodies) {
      expect(text.length).toBeGreaterThan(400_000);
      const started = performance.now();
      const found = findUnsafeNumberLiteral(text);
      // Generous for a loaded machine; a quadratic scan of these would take minutes.
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(found?.pointer).toBe(pointer);
    }
  });
});

describe("findUnsafeNumber (values in memory)", () => {
  it("finds computed values the text scan never sees, with their pointer", () => {
    expect(findUnsafeNumber({ a: [1, { b: 2 ** 60 }] })).toEqual({ pointer: "/a/1/b", literal: String(2 ** 60) });
    expect(findUnsafeNumber(Infinity)).toEqual({ pointer: "", literal: "Infinity" });
    expect(findUnsafeNumber({ "a/b": NaN })?.pointer).toBe("/a~1b");
    expect(findUnsafeNumber({ a: "12345678901234567891", b: [Number.MAX_SAFE_INTEGER, 0.1], c: null })).toBeUndefined();
    // Deep nesting does not overflow the call stack.
    let deep: unknown = 1e300;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(findUnsafeNumber(deep)?.pointer).toBe("/0".repeat(100_000));
  });
});
