import { describe, expect, it } from "vitest";
import { jsonDepth } from "../../src/lib/json-depth";

describe("jsonDepth", () => {
  it.each([
    ["1", 0],
    ['"[{"', 0],
    ["[]", 1],
    ["{}", 1],
    ['{"a":[1,{"b":[]}],"c":{}}', 4],
    ["[[],[[]],[]]", 3],
    // Brackets in strings and names, behind escaped quotes and backslashes, are text.
    ['["\\"[[[", "\\\\", "]]]{{{", {"[[[": "\\\\\\"{{"}]', 2],
  ])("measures %s as %i", (text, depth) => {
    expect(jsonDepth(text)).toBe(depth);
  });

  it("measures a million levels in one pass, without recursion", () => {
    const levels = 1_000_000;
    const text = `${'{"a":['.repeat(levels / 2)}1${"]}".repeat(levels / 2)}`;
    const started = performance.now();
    expect(jsonDepth(text)).toBe(levels);
    // Generous for a loaded machine; what matters is that it ends, and does not overflow the stack.
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
