import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";

describe("the worker", () => {
  it("serves a health route", async () => {
    const res = await SELF.fetch("http://idemflow.test/health");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, service: "idemflow" });
  });

  it("answers unknown routes with problem+json", async () => {
    const res = await SELF.fetch("http://idemflow.test/nope");
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
  });
});
