/** The one key rule (src/lib/key-constraints.ts): lengths, alphabets, and what a failure reports. */
import { describe, expect, it } from "vitest";
import { DEFAULT_KEY_CONSTRAINTS, validateKey, type KeyConstraints, type KeyProblem } from "../../src/lib/key-constraints";

const problemsOf = (value: string, constraints: KeyConstraints = DEFAULT_KEY_CONSTRAINTS): readonly KeyProblem[] => {
  const check = validateKey(value, constraints);
  return check.ok ? [] : check.problems;
};

describe("validateKey with the default constraints (1–255 printable ASCII)", () => {
  it.each([
    ["0 characters", "", [{ reason: "empty" }]],
    ["1 character", "k", []],
    ["255 characters", "k".repeat(255), []],
    ["256 characters", "k".repeat(256), [{ reason: "too_long", length: 256 }]],
    ["a million characters", "k".repeat(1_000_000), [{ reason: "too_long", length: 1_000_000 }]],
  ] as const)("length: %s", (_, value, problems) => {
    expect(problemsOf(value)).toEqual(problems);
  });

  it("accepts every printable ASCII character, space and ~ (the ends of the range) included", () => {
    const all = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i)).join("");
    expect(all).toHaveLength(95);
    expect(validateKey(all, DEFAULT_KEY_CONSTRAINTS)).toEqual({ ok: true });
    expect(validateKey(" ", DEFAULT_KEY_CONSTRAINTS)).toEqual({ ok: true }); // trimming is the caller's
  });

  it.each([
    ["NUL", "\u0000", 0x00],
    ["TAB (a header may carry it; a key may not)", "\t", 0x09],
    ["LF", "\n", 0x0a],
    ["CR", "\r", 0x0d],
    ["ESC", "\u001b", 0x1b],
    ["US, the last C0 control", "\u001f", 0x1f],
    ["DEL", "\u007f", 0x7f],
    ["a C1 control", "\u0085", 0x85],
    ["Latin-1 é", "é", 0xe9],
    ["a BMP character beyond Latin-1", "名", 0x540d],
    ["an astral character (a surrogate pair)", "😀", 0x1f600],
    ["a lone surrogate", "\ud800", 0xd800],
    ["a BOM", "\ufeff", 0xfeff],
  ] as const)("refuses %s, at its position", (_, bad, codePoint) => {
    expect(problemsOf(bad)).toEqual([{ reason: "bad_character", position: 0, codePoint }]);
    expect(problemsOf(`ab${bad}c${bad}`)).toEqual([{ reason: "bad_character", position: 2, codePoint }]);
  });

  it("a key that breaks both rules reports both, length first (each caller picks which to name)", () => {
    expect(problemsOf(`${"k".repeat(300)}é`)).toEqual([
      { reason: "too_long", length: 301 },
      { reason: "bad_character", position: 300, codePoint: 0xe9 },
    ]);
  });

  it("counts length in UTF-16 code units, as String.length does", () => {
    expect(problemsOf("😀".repeat(128))).toEqual([
      { reason: "too_long", length: 256 },
      { reason: "bad_character", position: 0, codePoint: 0x1f600 },
    ]);
  });

  it("is frozen, so no caller can loosen the rule for the others", () => {
    expect(Object.isFrozen(DEFAULT_KEY_CONSTRAINTS)).toBe(true);
    expect(Object.isFrozen(DEFAULT_KEY_CONSTRAINTS.alphabet)).toBe(true);
    expect(Object.isFrozen(DEFAULT_KEY_CONSTRAINTS.alphabet.ranges)).toBe(true);
  });
});

describe("validateKey with a destination's own constraints", () => {
  const strict: KeyConstraints = {
    minLength: 8,
    maxLength: 16,
    alphabet: {
      name: "letters, digits and '-'",
      ranges: [
        [0x30, 0x39],
        [0x41, 0x5a],
        [0x61, 0x7a],
        [0x2d, 0x2d],
      ],
    },
  };

  it.each([
    ["", [{ reason: "empty" }]],
    ["abc-123", [{ reason: "too_short", length: 7 }]],
    ["abcd-123", []],
    ["abcd-1234-EFGH-5", []],
    ["abcd-1234-EFGH-56", [{ reason: "too_long", length: 17 }]],
    ["abcd_1234", [{ reason: "bad_character", position: 4, codePoint: 0x5f }]],
    [
      "a b",
      [
        { reason: "too_short", length: 3 },
        { reason: "bad_character", position: 1, codePoint: 0x20 },
      ],
    ],
  ] as const)("%j", (value, problems) => {
    expect(problemsOf(value, strict)).toEqual(problems);
  });

  it("a minimum of 0 accepts the empty key", () => {
    expect(validateKey("", { ...DEFAULT_KEY_CONSTRAINTS, minLength: 0 })).toEqual({ ok: true });
  });

  it("an alphabet beyond the BMP takes a surrogate pair as one character", () => {
    const emoji: KeyConstraints = { minLength: 1, maxLength: 10, alphabet: { name: "emoji", ranges: [[0x1f600, 0x1f64f]] } };
    expect(validateKey("😀🙏", emoji)).toEqual({ ok: true });
    expect(problemsOf("😀a", emoji)).toEqual([{ reason: "bad_character", position: 2, codePoint: 0x61 }]);
  });
});
