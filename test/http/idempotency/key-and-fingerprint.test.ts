/** The pure parts of the middleware: Idempotency-Key parsing and the request fingerprint. */
import { describe, expect, it } from "vitest";
import { fingerprintRequest, parseIdempotencyKey } from "../../../src/http/idempotency";
import { pathAndQuery } from "../../../src/http/idempotency/fingerprint";

describe("parseIdempotencyKey", () => {
  it.each([
    ["abc-123", "abc-123"],
    ['"abc-123"', "abc-123"],
    ['"a \\"quoted\\" \\\\ key"', 'a "quoted" \\ key'],
    ['"a,b"', "a,b"],
    ["with space inside", "with space inside"],
    ["  padded  ", "padded"],
    ['"k";v=1', "k"],
    ['"k";a;b=?0;c=-12;d=1.5;e=tok/x:y;f=:aGk=:;g="q;\\"r"', "k"],
    ['"a\\"b";v=1', 'a"b'],
    ['"k"; v=1', "k"],
    ["k;v=1", "k;v=1"],
  ])("reads %s as %s", (header, key) => {
    expect(parseIdempotencyKey(header)).toEqual({ ok: true, key });
  });

  it.each([
    "",
    '""',
    '"unterminated',
    '"a"b',
    '"\\x"',
    "a, b",
    "é",
    "k".repeat(256),
    `"${"k".repeat(256)}"`,
    '"tab\there"',
    '"k";',
    '"k";V=1',
    '"k" ;v=1',
    '"k";v=',
    '"k";v=1.2345',
    '"k";v="open',
    '"k";v=1,x',
  ])("rejects %j", (header) => {
    expect(parseIdempotencyKey(header).ok).toBe(false);
  });

  it("accepts exactly 255 characters", () => {
    expect(parseIdempotencyKey("k".repeat(255)).ok).toBe(true);
  });

  it.each([
    ["", "the key is empty"],
    ['""', "the key is empty"],
    ["   ", "the key is empty"],
    ["k".repeat(256), "the key is 256 characters long; the limit is 255"],
    [`"${"k".repeat(300)}"`, "the key is 300 characters long; the limit is 255"],
    ["clé", "a key may contain only printable ASCII characters (0x20–0x7E)"],
    ["a\u0000b", "a key may contain only printable ASCII characters (0x20–0x7E)"],
    // Both rules broken: the characters are named (the Gateway step names the length instead).
    [`${"k".repeat(300)}é`, "a key may contain only printable ASCII characters (0x20–0x7E)"],
  ])("explains why %j is refused", (header, reason) => {
    expect(parseIdempotencyKey(header)).toEqual({ ok: false, reason });
  });
});

describe("pathAndQuery", () => {
  it.each([
    ["http://h.test/a/b?x=1&y=%32", "/a/b?x=1&y=%32"],
    ["http://h.test/a?x#frag", "/a?x"],
    ["http://h.test?x=1", "?x=1"],
    ["http://h.test", ""],
    ["https://user@h.test:8443/p", "/p"],
  ])("takes %s verbatim as %s", (url, expected) => {
    expect(pathAndQuery(url)).toBe(expected);
  });
});

describe("fingerprintRequest", () => {
  const base = {
    method: "post",
    url: "http://h.test/orders?a=1",
    headers: new Headers({ "content-type": "application/json" }),
    headerNames: ["content-type"],
    body: new TextEncoder().encode("{}"),
  };
  const fp = (over: Partial<typeof base> | { body: Uint8Array | null }) => fingerprintRequest({ ...base, ...over });

  it("is stable and ignores the method's letter case and the host", async () => {
    expect(await fp({})).toBe(await fp({ method: "POST", url: "http://other.test/orders?a=1" }));
    expect(await fp({})).toMatch(/^[0-9a-f]{64}$/);
  });

  it("distinguishes an absent body from an empty one, and an absent header from an empty one", async () => {
    expect(await fp({ body: null })).not.toBe(await fp({ body: new Uint8Array() }));
    expect(await fp({ headers: new Headers() })).not.toBe(await fp({ headers: new Headers({ "content-type": "" }) }));
  });

  it("cannot be forged by moving bytes between fields", async () => {
    const a = await fingerprintRequest({ ...base, url: "http://h.test/ab", body: new TextEncoder().encode("c") });
    const b = await fingerprintRequest({ ...base, url: "http://h.test/a", body: new TextEncoder().encode("bc") });
    expect(a).not.toBe(b);
  });
});
