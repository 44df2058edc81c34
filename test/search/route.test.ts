/**
 * The search's parameters on `GET /v1/executions` (src/ingress/search-terms.ts): one search at a
 * time, each refused with the list's 400 `invalid-query` problem naming the parameter; the paging of
 * a search (one cursor over kept and removed matches); and the start batch's statement budget with
 * the index row — one statement more for a fields or client identity, none for a content identity,
 * and a duplicate trigger's batch writes no row.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { triggerFromRequest } from "../../src/ingress/trigger";
import { helperKeys } from "../../src/ingress/search-terms";
import { idempotencyKey } from "../../src/expressions/key-helpers";
import type { StepMessage } from "../../src/steps/messages";
import { countingD1 } from "../helpers/counting-d1";
import { BASE, jsonRequest, transformWorkflow } from "../ingress/helpers";
import { callApp, harness, seedWorkflow, unique } from "../steps/helpers";
import { byIdentity, search, trigger, WS } from "./helpers";

describe("the search parameters", () => {
  it.each([
    ["identity=a&destinationKey=b", "destinationKey"],
    ["destinationKey=b&keyPrefix=charge&keyValues=%5B1%5D", "keyPrefix"],
    ["keyPrefix=charge", "keyValues"],
    ["keyValues=%5B1%5D", "keyPrefix"],
    ["keyPrefix=charge&keyValues=A-1", "keyValues"],
    ["keyPrefix=charge&keyValues=%5B%5D", "keyValues"],
    ["keyPrefix=charge&keyValues=%5B12345678901234567891%5D", "keyValues"],
    ["keyPrefix=no%20spaces&keyValues=%5B1%5D", "keyPrefix"],
    [`identity=${"x".repeat(513)}`, "identity"],
    [`destinationKey=${"k".repeat(256)}`, "destinationKey"],
    ["identity=", "identity"],
  ])("?%s → 400 invalid-query naming %s", async (query, name) => {
    const h = harness();
    const response = await callApp(h, "GET", `/v1/executions?${query}`);
    expect(response.status).toBe(400);
    expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    const problem = (await response.json()) as { code: string; detail: string };
    expect(problem.code).toBe("invalid-query");
    expect(problem.detail.startsWith(`${name}:`) || problem.detail.includes(name)).toBe(true);
  });

  it("a value whose canonical JSON is over the bound (escapes count) is refused, though its text fits", async () => {
    const h = harness();
    const response = await callApp(h, "GET", `/v1/executions?identity=${encodeURIComponent('"'.repeat(300))}`);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { detail: string }).detail).toMatch(/^identity: longer than any indexed value/);
  });

  it("the helper's keys: the unshaped one first, each shape once, every one a valid key", async () => {
    const keys = await helperKeys("charge", ["A-1001"]);
    expect(keys[0]).toBe(await idempotencyKey("charge", "A-1001"));
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys.length).toBe(28 + 41); // base64url cut to 16…43 characters, hex to 24…64
    expect(keys.every((k) => k.startsWith("charge") && k.length <= 255)).toBe(true);
  });

  it("pages a search with the list's cursor, newest first", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, transformWorkflow(unique("wf"), { idempotencyFields: ["order.id", "order.region"] }));
    const region = unique("region");
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.unshift((await trigger(h, wf, { order: { id: unique("O"), region } })).executionId);
      h.clock.advance(1000);
    }
    const first = await search(h, `${byIdentity(region)}&limit=2`);
    const second = await search(h, `${byIdentity(region)}&limit=2&cursor=${first.nextCursor}`);
    const third = await search(h, `${byIdentity(region)}&limit=2&cursor=${second.nextCursor}`);
    expect([...first.items, ...second.items, ...third.items].map((i) => i.executionId)).toEqual(ids);
    expect(third.nextCursor).toBeNull();
  });
});

describe("the start batch's budget with the index row", () => {
  const fire = (db: D1Database, workflowId: string, body: unknown, query = "") =>
    triggerFromRequest(
      { db, queue: env.QUEUE as Queue<StepMessage>, now: () => Date.now() },
      {
        workspace: WS,
        workflowId,
        invocation: "production",
        request: jsonRequest(`${BASE}/v1/workflows/${workflowId}/trigger${query}`, body),
      },
    );

  it("a fields or client identity adds no statement (the execution insert's trigger indexes it); a duplicate writes no row", async () => {
    const counted = countingD1(env.DB);
    const content = await seedWorkflow(WS, transformWorkflow(unique("wf")));
    const fields = await seedWorkflow(WS, transformWorkflow(unique("wf"), { idempotencyFields: ["order.id", "order.email"] }));
    // Warm the isolate's workflow cache: the budget is the start batch alone.
    await fire(counted.db, content.workflowId, { warm: 1 });
    await fire(counted.db, fields.workflowId, { order: { id: unique("warm"), email: "w" } });
    const batchOf = async (workflowId: string, body: unknown, query = "") => {
      counted.reset();
      const result = await fire(counted.db, workflowId, body, query);
      expect(counted.roundTrips()).toBe(1);
      return { result, statements: counted.statements() };
    };
    const plain = await batchOf(content.workflowId, { n: unique("c") });
    const byFields = await batchOf(fields.workflowId, { order: { id: unique("f"), email: "e@example.test" } });
    const byClient = await batchOf(content.workflowId, { n: 1 }, `?clientIdempotencyId=${unique("client")}`);
    // Three statements whatever the identity: the claim, the execution, the start steps (migrations/0024).
    expect(plain.statements).toBe(3);
    expect(byFields.statements).toBe(plain.statements);
    expect(byClient.statements).toBe(plain.statements);

    const rows = async () => (await env.DB.prepare("SELECT count(*) AS n FROM identity_values").first<{ n: number }>())!.n;
    const before = await rows();
    const order = unique("dup");
    const created = await batchOf(fields.workflowId, { order: { id: order, email: "d@example.test" } });
    expect(await rows()).toBe(before + 2);
    const duplicate = await batchOf(fields.workflowId, { order: { id: order, email: "d@example.test" } });
    expect(duplicate.result.deduplicated).toBe(true);
    expect(duplicate.statements).toBe(created.statements);
    expect(await rows()).toBe(before + 2);
  });
});
