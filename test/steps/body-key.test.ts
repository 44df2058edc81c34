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
});
