/**
 * `GET /v1/executions?identity=` (SPEC section 15, docs/ingress.md "Search by business id"): the
 * executions whose trigger identity was built from a business value — a field of `idempotencyFields`
 * (one, or each of a list), a `clientIdempotencyId` — and never one of a content identity or of
 * another workspace. Values are normalised as the identity normalises them; the duplicate trigger
 * writes no row; a start over is found by its trigger's values; user-named paths and values
 * (`__proto__`) are data. Real D1, the real trigger service and route.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { identityValueHash } from "../../src/ingress/identity-values";
import { dbOf } from "../helpers/shards";
import { harness, seedWorkflow, unique } from "../steps/helpers";
import { transformWorkflow } from "../ingress/helpers";
import { byIdentity, chargeOn, idsFound, search, trigger, valueRowsOf, WS } from "./helpers";

describe("search by business id: what is indexed", () => {
  it("one field: the execution of order A is found by A, with its duplicates stopped and the keys it sent", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeOn("order.id"));
    const order = unique("A");
    const started = await trigger(h, wf, { order: { id: order, total: 42 } });
    await trigger(h, wf, { order: { total: 42, id: order, note: "resent" } }); // a duplicate
    await h.drain();
    const answer = await search(h, byIdentity(order));
    expect(answer.status).toBe(200);
    expect(answer.items.map((i) => i.executionId)).toEqual([started.executionId]);
    expect(answer.items[0]!.duplicatesStopped.triggers).toBe(1);
    expect(answer.removed).toEqual([]);
    // The key the charge step sent, with where and by whom it was first sent.
    expect(answer.keys).toEqual([
      expect.objectContaining({ key: expect.stringMatching(/^charge-/), executionId: started.executionId, vertexId: "charge" }),
    ]);
    expect(await valueRowsOf(started.executionId)).toBe(1);
    // Another order's value finds nothing.
    expect((await search(h, byIdentity(unique("A")))).items).toEqual([]);
  });

  it("an array of fields: one row per value, each value finds the execution", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeOn(["order.id", "customer.email", "order.channel"]));
    const order = unique("B");
    const email = `${unique("c")}@example.test`;
    const started = await trigger(h, wf, { order: { id: order, total: 1, channel: "web" }, customer: { email } });
    expect(await valueRowsOf(started.executionId)).toBe(3);
    expect((await idsFound(h, byIdentity(order))).items).toEqual([started.executionId]);
    expect((await idsFound(h, byIdentity(email))).items).toEqual([started.executionId]);
    // A value shared by many executions finds them all (here: this one, and no other workflow's).
    expect((await idsFound(h, `${byIdentity("web")}&workflowId=${wf.workflowId}`)).items).toEqual([started.executionId]);
  });

  it("a client id is a business value too", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeOn(null));
    const client = unique("client-77");
    const started = await trigger(h, wf, { order: { id: unique("C"), total: 3 } }, { query: `?clientIdempotencyId=${client}` });
    expect(await valueRowsOf(started.executionId)).toBe(1);
    expect((await idsFound(h, byIdentity(client))).items).toEqual([started.executionId]);
  });

  it("a content identity indexes nothing: no row, no statement, and its payload's values find nothing", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeOn(null));
    const order = unique("D");
    const started = await trigger(h, wf, { order: { id: order, total: 3 } });
    expect(await valueRowsOf(started.executionId)).toBe(0);
    expect((await idsFound(h, byIdentity(order))).items).toEqual([]);
  });

  it('numbers and strings: 1001 finds the number and the string, "1001" only the string, 1001.0 the number', async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, transformWorkflow(unique("wf"), { idempotencyFields: "order.id" }));
    const n = 100_000 + Math.floor(Math.random() * 1_000_000_000);
    const asNumber = await trigger(h, wf, { order: { id: n } });
    const asString = await trigger(h, wf, { order: { id: String(n) } });
    // 1001.0 is the number 1001 for the identity: a duplicate of the first, not a third execution.
    expect((await trigger(h, wf, { order: { id: Number(`${n}.0`) } })).executionId).toBe(asNumber.executionId);
    const both = [asNumber.executionId, asString.executionId].sort();
    const scoped = `&workflowId=${wf.workflowId}`;
    expect((await idsFound(h, byIdentity(String(n)) + scoped)).items).toEqual(both);
    expect((await idsFound(h, byIdentity(`"${n}"`) + scoped)).items).toEqual([asString.executionId]);
    expect((await idsFound(h, byIdentity(`${n}.0`) + scoped)).items).toEqual([asNumber.executionId]);
    expect((await idsFound(h, byIdentity(`${n}e0`) + scoped)).items).toEqual([asNumber.executionId]);
  });

  it("a duplicate trigger writes no row; a new window's execution gets its own", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, transformWorkflow(unique("wf"), { idempotencyFields: "order.id", dedupeWindow: "90s" }));
    const order = unique("E");
    const first = await trigger(h, wf, { order: { id: order } });
    const total = async () => (await env.DB.prepare("SELECT count(*) AS n FROM identity_values").first<{ n: number }>())!.n;
    const before = await total();
    for (let i = 0; i < 3; i++) expect((await trigger(h, wf, { order: { id: order } })).deduplicated).toBe(true);
    expect(await total()).toBe(before);
    await h.drain();
    h.clock.advance(91_000);
    const second = await trigger(h, wf, { order: { id: order } });
    expect(second.executionId).not.toBe(first.executionId);
    expect((await idsFound(h, byIdentity(order))).items).toEqual([first.executionId, second.executionId].sort());
  });

  it("another workspace never matches: its own search finds its own, the same value elsewhere finds nothing", async () => {
    const h = harness();
    const order = unique("F");
    const mine = await trigger(h, await seedWorkflow(WS, chargeOn("order.id")), { order: { id: order, total: 1 } });
    const theirs = await trigger(h, await seedWorkflow("other", chargeOn("order.id")), { order: { id: order, total: 1 } });
    expect((await idsFound(h, byIdentity(order))).items).toEqual([mine.executionId]);
    expect((await idsFound(h, byIdentity(order), "other-token")).items).toEqual([theirs.executionId]);
    // Not even the hash is shared: the workspace is inside it.
    expect(await identityValueHash(WS, order)).not.toBe(await identityValueHash("other", order));
    const hashes = await dbOf(env, "other")
      .prepare("SELECT value_hash FROM identity_values WHERE execution_id = ?1")
      .bind(theirs.executionId)
      .all();
    expect(hashes.results).toEqual([{ value_hash: await identityValueHash("other", order) }]);
  });

  it("a start over is found by its trigger's values (its rows are copied); a test run of the same payload is not", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeOn("order.id"));
    const order = unique("G");
    const first = await trigger(h, wf, { order: { id: order, total: 5 } });
    await h.drain();
    const over = await h.startOver(wf, { order: { id: order, total: 5 } }, first.executionId);
    expect(await valueRowsOf(over.executionId)).toBe(1);
    await h.start(wf, { order: { id: order, total: 5 } }); // forced: no identity, no value
    expect((await idsFound(h, byIdentity(order))).items).toEqual([first.executionId, over.executionId].sort());
  });

  it("`__proto__` as a field path and as a value is data", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, transformWorkflow(unique("wf"), { idempotencyFields: ["__proto__", "order.id"] }));
    const marker = unique("P");
    const byPath = await trigger(h, wf, JSON.parse(`{"__proto__": "${marker}", "order": {"id": "__proto__"}}`));
    expect(await valueRowsOf(byPath.executionId)).toBe(2);
    expect((await idsFound(h, byIdentity(marker))).items).toEqual([byPath.executionId]);
    expect((await idsFound(h, `${byIdentity("__proto__")}&workflowId=${wf.workflowId}`)).items).toEqual([byPath.executionId]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("a value too long for the index is not indexed; the fields' other values are", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, transformWorkflow(unique("wf"), { idempotencyFields: ["order.id", "order.note"] }));
    const order = unique("H");
    const started = await trigger(h, wf, { order: { id: order, note: "x".repeat(600) } });
    expect(await valueRowsOf(started.executionId)).toBe(1);
    expect((await idsFound(h, byIdentity(order))).items).toEqual([started.executionId]);
  });
});
