/** The one date formatter (src/lib/iso-time.ts): a time a four-digit year can show, else null. */
import { describe, expect, it } from "vitest";
import { isoTime, isoTimeText } from "../../src/lib/iso-time";

describe("isoTime", () => {
  it.each([
    [0, "1970-01-01T00:00:00.000Z"],
    [1_900_000_000_000, "2030-03-17T17:46:40.000Z"],
    [253_402_300_799_999, "9999-12-31T23:59:59.999Z"],
    [-62_167_219_200_000, "0000-01-01T00:00:00.000Z"],
  ])("%d → %s", (ms, text) => {
    expect(isoTime(ms)).toBe(text);
  });

  it.each([
    ["absent", null],
    ["undefined", undefined],
    ["NaN", NaN],
    ["Infinity", Infinity],
    ["year 10000 (a Date holds it, but prints +010000-…)", 253_402_300_800_000],
    ["before year 0000", -62_167_219_200_001],
    ["past what a Date holds (toISOString throws)", 8.64e15 + 1],
    ["first send + a retention of Number.MAX_SAFE_INTEGER", 1_900_000_000_000 + Number.MAX_SAFE_INTEGER],
  ])("%s → null, never a throw", (_, ms) => {
    expect(isoTime(ms)).toBeNull();
  });
});

describe("isoTimeText", () => {
  it("is the ISO text, or says in words which time it cannot show", () => {
    expect(isoTimeText(0)).toBe("1970-01-01T00:00:00.000Z");
    expect(isoTimeText(Number.MAX_SAFE_INTEGER)).toBe(`a time outside years 0000–9999 (${Number.MAX_SAFE_INTEGER} ms since 1970)`);
  });
});
