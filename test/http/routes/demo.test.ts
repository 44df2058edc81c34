/** The demo endpoint (src/http/routes/demo.ts) through the whole Worker (SELF). */
import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";

const post = (path: string, headers: Record<string, string>, body = '{"item":"book"}') =>
  SELF.fetch(`http://idemflow.test${path}`, {
    method: "POST",
    headers: { authorization: "Bearer dev-token", "content-type": "application/json", ...headers },
    body,
  });

describe("POST /demo/orders", () => {
  it("creates an order once and replays it for the same key", async () => {
    const key = `demo-${crypto.randomUUID()}`;
    const first = await post("/demo/orders", { "idempotency-key": key });
    expect(first.status).toBe(201);
    const order = (await first.json()) as { id: string; workspace: string };
    expect(order.workspace).toBe("dev");
    expect(first.headers.get("location")).toBe(`/demo/orders/${order.id}`);
    const replay = await post("/demo/orders", { "idempotency-key": key });
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(((await replay.json()) as { id: string }).id).toBe(order.id);
  });

  it("requires a key and a bearer token", async () => {
    const missing = await post("/demo/orders", {});
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { code: string }).code).toBe("idempotency-key-missing");
    const anonymous = await SELF.fetch("http://idemflow.test/demo/orders", {
      method: "POST",
      headers: { "idempotency-key": "x" },
      body: "{}",
    });
    expect(anonymous.status).toBe(401);
  });

  it("has an unguarded twin (for the benchmark) that creates a new order every time", async () => {
    const a = (await (await post("/demo/orders-unguarded", { "idempotency-key": "same" })).json()) as { id: string };
    const b = (await (await post("/demo/orders-unguarded", { "idempotency-key": "same" })).json()) as { id: string };
    expect(a.id).not.toBe(b.id);
  });
});
