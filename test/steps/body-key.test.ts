import { describe, expect, it } from "vitest";
import { pointerTokens } from "../../src/lib/json-pointer";
import { placeKeyInBody } from "../../src/steps/gateway/body-key";

describe("placeKeyInBody", () => {
  it("sets the key at the pointer of a copy, creating missing objects on the way; a missing body becomes an object", () => {
    const body = { amount: 5, payment: { currency: "EUR" } };
    expect(placeKeyInBody(body, "/idempotency_key", "k-1")).toEqual({
      body: { amount: 5, payment: { currency: "EUR" }, idempotency_key: "k-1" },
    });
    expect(placeKeyInBody(body, "/payment/key", "k-1")).toEqual({ body: { amount: 5, payment: { currency: "EUR", key: "k-1" } } });
    expect(placeKeyInBody(body, "/meta/request/key", "k-1")).toEqual({
      body: { amount: 5, payment: { currency: "EUR" }, meta: { request: { key: "k-1" } } },
    });
    expect(body).toEqual({ amount: 5, payment: { currency: "EUR" } });
    expect(placeKeyInBody(undefined, "/idempotency_key", "k-1")).toEqual({ body: { idempotency_key: "k-1" } });
  });

  it("replaces a value the body already has there: the declared key is the one sent", () => {
    expect(placeKeyInBody({ idempotency_key: "stale" }, "/idempotency_key", "k-1")).toEqual({ body: { idempotency_key: "k-1" } });
  });

  it("unescapes ~1 and ~0 (RFC 6901)", () => {
    expect(pointerTokens("/a~1b/c~0d")).toEqual(["a/b", "c~d"]);
    expect(placeKeyInBody({}, "/x~1y", "k")).toEqual({ body: { "x/y": "k" } });
  });

  it("refuses a body, or a member on the way, that is not a JSON object", () => {
    expect(placeKeyInBody("text", "/k", "v")).toEqual({
      error: "the key travels in body field /k, but the body evaluated to a string, not a JSON object",
    });
    expect(placeKeyInBody([1], "/k", "v")).toEqual({
      error: "the key travels in body field /k, but the body evaluated to an array, not a JSON object",
    });
    expect(placeKeyInBody({ payment: null }, "/payment/k", "v")).toEqual({
      error: "the key travels in body field /payment/k, but the body's /payment is null, not a JSON object",
    });
    expect(placeKeyInBody({ a: { b: [] } }, "/a/b/k", "v")).toEqual({
      error: "the key travels in body field /a/b/k, but the body's /a/b is an array, not a JSON object",
    });
  });

  it.each(["__proto__", "constructor", "prototype", "toString"])(
    "places the key under a member named %s as the body's own member, never on Object.prototype",
    (name) => {
      const nested = placeKeyInBody({ amount: 5 }, `/${name}/x`, "k-1");
      expect(JSON.stringify(nested)).toBe(`{"body":{"amount":5,"${name}":{"x":"k-1"}}}`);
      const top = placeKeyInBody({ amount: 5 }, `/${name}`, "k-1");
      expect(JSON.stringify(top)).toBe(`{"body":{"amount":5,"${name}":"k-1"}}`);
      // A body that already has that member (JSON.parse makes it own) keeps its other fields.
      const own = placeKeyInBody(JSON.parse(`{"${name}": {"y": 1}}`), `/${name}/x`, "k-1");
      expect(JSON.stringify(own)).toBe(`{"body":{"${name}":{"y":1,"x":"k-1"}}}`);
      expect(({} as Record<string, unknown>).x).toBeUndefined();
      expect(Object.getPrototypeOf({})).toBe(Object.prototype);
      expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain("x");
    },
  );
});
