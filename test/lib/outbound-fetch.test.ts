/**
 * The outbound seam (src/lib/outbound-fetch.ts): a Gateway step's call goes to the fetch the env
 * carries — through the queue handler and the shard env it builds (shard 1 here) — and to the global
 * `fetch` when the env carries none (production).
 */
import { createExecutionContext, createMessageBatch, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import { outboundFetchOf, withOutboundFetch } from "../../src/lib/outbound-fetch";
import { handleQueueBatch } from "../../src/queue";
import { shardEnv } from "../../src/shards/shard-env";
import { deliveredEnv } from "../helpers/shards";

const WORKFLOW = {
  id: "seam",
  vertices: [
    { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order" } },
    {
      id: "charge",
      type: "GATEWAY",
      config: {
        method: "POST",
        url: "http://localhost:8788/payments/charges",
        headers: { "Idempotency-Key": "= $idempotencyKey('charge', payload.order)" },
        body: "= { 'order': payload.order }",
      },
    },
  ],
  edges: [{ from: "received", to: "charge" }],
};

describe("the outbound seam", () => {
  it("a step's call goes to the env's fetch, across the shard env the queue handler builds", async () => {
    const sent: unknown[] = [];
    const calls: Array<{ url: string; key: string | null }> = [];
    const base = {
      ...deliveredEnv(env),
      QUEUE: {
        send: async (b: unknown) => void sent.push(b),
        sendBatch: async (ms: Iterable<MessageSendRequest>) => void [...ms].forEach((m) => sent.push(m.body)),
      },
      CHAIN_STEPS: "off",
      D1_SHARDS: "DB,DB_1",
      WORKSPACE_SHARDS: "seam-b:1",
      API_TOKENS: "seam-token:seam-b",
    } as unknown as Env;
    const e = withOutboundFetch(base, async (input, init) => {
      const request = new Request(input as RequestInfo, init);
      calls.push({ url: request.url, key: request.headers.get("idempotency-key") });
      return Response.json({ id: "ch_1" }, { status: 201 });
    });
    expect(outboundFetchOf(shardEnv(e, 1))).toBe(outboundFetchOf(e));
    const call = async (method: string, path: string, body: unknown) => {
      const ctx = createExecutionContext();
      const headers = { authorization: "Bearer seam-token", "content-type": "application/json" };
      const res = await app.fetch(new Request(`http://idemflow.test${path}`, { method, headers, body: JSON.stringify(body) }), e, ctx);
      await waitOnExecutionContext(ctx);
      return res;
    };
    expect((await call("PUT", "/v1/workflows/seam", WORKFLOW)).status).toBe(201);
    expect((await call("POST", "/v1/workflows/seam/trigger", { order: "S-1" })).status).toBe(202);
    const batch = createMessageBatch<unknown>("idemflow-steps", [{ id: "m0", timestamp: new Date(), attempts: 1, body: sent.shift() }]);
    const ctx = createExecutionContext();
    await handleQueueBatch(batch, e, ctx);
    await waitOnExecutionContext(ctx);
    expect(calls).toEqual([{ url: "http://localhost:8788/payments/charges", key: expect.stringMatching(/^charge-/) }]);
  });

  it("without one, the global fetch (production)", async () => {
    const spy = vi.spyOn(globalThis, "fetch").mockResolvedValue(new Response("ok"));
    await outboundFetchOf(env)("http://localhost:8788/x");
    expect(spy).toHaveBeenCalledOnce();
    spy.mockRestore();
  });
});
