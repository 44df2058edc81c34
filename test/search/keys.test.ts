/**
 * `GET /v1/executions?destinationKey=` and `?keyPrefix=&keyValues=` (SPEC section 15, docs/ingress.md
 * "Search by business id"): every execution whose step sent a key — the members of a lineage (a start
 * over sends the same key), another workflow sending the same business key — with the key's sends on
 * record; a key made by `$idempotencyKey` found from its prefix and business values, in whatever
 * shape the step's constraints cut it to. Real D1, the real trigger service, steps and route.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { harness, seedWorkflow, stepsOf, unique } from "../steps/helpers";
import { chargeOn, idsFound, search, trigger, WS } from "./helpers";

/** A charge whose key is the literal `charge-<order id>` (the README's order-fulfilment). */
const literalKey = () =>
  chargeOn("order.id", {
    headers: { "Idempotency-Key": "= 'charge-' & payload.order.id", Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" },
  });

const byKey = (key: string) => `destinationKey=${encodeURIComponent(key)}`;
const byHelper = (prefix: string, values: unknown[]) => `keyPrefix=${prefix}&keyValues=${encodeURIComponent(JSON.stringify(values))}`;

describe("search by destination key", () => {
  it("finds every member of a lineage that sent the key (a start over), and another workflow that sent it too", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, literalKey());
    const order = unique("K");
    const first = await trigger(h, wf, { order: { id: order, total: 9 } });
    await h.drain();
    const over = await h.startOver(wf, { order: { id: order, total: 9 } }, first.executionId);
    await h.drain();
    const elsewhere = await trigger(h, await seedWorkflow(WS, literalKey()), { order: { id: order, total: 9 } });
    await h.drain();
    expect((await stepsOf(over.executionId)).charge!.idempotency_key).toBe(`charge-${order}`);

    const answer = await search(h, byKey(`charge-${order}`));
    expect(answer.items.map((i) => i.executionId).sort()).toEqual([first.executionId, over.executionId, elsewhere.executionId].sort());
    // The destination saw one key: one send on record, by the execution that sent it first.
    expect(answer.keys).toEqual([
      expect.objectContaining({ key: `charge-${order}`, destination: "http://localhost:8788", executionId: first.executionId }),
    ]);
    // The destination replayed the later sends from its own store: the duplicates it stopped show.
    expect(answer.items.find((i) => i.executionId === over.executionId)!.duplicatesStopped.destinationReplays).toBe(1);
    expect((await search(h, byKey(`charge-${unique("K")}`))).items).toEqual([]);
    // Another workspace's token never sees them.
    expect((await idsFound(h, byKey(`charge-${order}`), "other-token")).items).toEqual([]);
  });

  it("two executions sending one key at once: both found — the first by its send row, the other by steps_by_key", async () => {
    // Each through its first attempt's key persist (the queue), delivered concurrently; and each through
    // the start batch's chained insert (chaining on), triggered concurrently.
    for (const chain of [false, true]) {
      const h = harness({}, chain ? { chain: true } : {});
      const order = unique(chain ? "CC" : "CQ");
      const [a, b] = [await seedWorkflow(WS, literalKey()), await seedWorkflow(WS, literalKey())];
      const started = await Promise.all([
        trigger(h, a!, { order: { id: order, total: 9 } }),
        trigger(h, b!, { order: { id: order, total: 9 } }),
      ]);
      if (!chain) {
        const charges = h.queue.take();
        expect(charges).toHaveLength(2);
        await Promise.all(charges.map((m) => h.deliver([m.body])));
      }
      await h.drain();
      const ids = started.map((s) => s.executionId);
      expect((await idsFound(h, byKey(`charge-${order}`))).items.sort(), `chain ${chain}`).toEqual([...ids].sort());
      // One send on record, naming one of them; that one's step is left out of steps_by_key (migrations/0043).
      const { results } = await env.DB.prepare(
        `SELECT s.execution_id AS id, s.key_first_send AS first,
                (SELECT count(*) FROM destination_key_sends ks
                 WHERE ks.workspace = s.workspace AND ks.idempotency_key = s.idempotency_key AND ks.execution_id = s.execution_id) AS named
         FROM steps s WHERE s.execution_id IN (?1, ?2) AND s.vertex_id = 'charge' ORDER BY s.execution_id`,
      )
        .bind(...ids)
        .all<{ id: string; first: number | null; named: number }>();
      expect(results.map((r) => [r.first, r.named]).sort(), `chain ${chain}`).toEqual([
        [null, 0],
        [1, 1],
      ]);
    }
  });

  it("a key made by $idempotencyKey is found from its prefix and business values", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeOn("order.id")); // $idempotencyKey('charge', payload.order.id)
    const order = unique("L");
    const started = await trigger(h, wf, { order: { id: order, total: 2 } });
    await h.drain();
    const key = (await stepsOf(started.executionId)).charge!.idempotency_key!;
    expect((await idsFound(h, byHelper("charge", [order]))).items).toEqual([started.executionId]);
    expect((await idsFound(h, byKey(key))).items).toEqual([started.executionId]);
    // Another prefix, or the value's other type, is another key.
    expect((await idsFound(h, byHelper("ship", [order]))).items).toEqual([]);
    const numbered = await trigger(h, await seedWorkflow(WS, chargeOn("order.id")), { order: { id: 4242, total: 2 } });
    await h.drain();
    expect((await idsFound(h, byHelper("charge", [4242]))).items).toContain(numbered.executionId);
    expect((await idsFound(h, byHelper("charge", ["4242"]))).items).not.toContain(numbered.executionId);
  });

  it.each([
    ["a hex digest (alphanumeric, 40 characters)", { alphabet: "alphanumeric", maxLength: 40 }],
    ["a cut base64url digest (30 characters)", { maxLength: 30 }],
  ])("finds a shaped key: %s", async (_, constraints) => {
    const h = harness();
    const wf = await seedWorkflow(
      WS,
      chargeOn("order.id", {
        headers: { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" },
        idempotencyKey: { value: "= $idempotencyKey('charge', payload.order.id)", ...constraints },
      }),
    );
    const order = unique("M");
    const started = await trigger(h, wf, { order: { id: order, total: 2 } });
    await h.drain();
    const key = (await stepsOf(started.executionId)).charge!.idempotency_key!;
    expect(key.length).toBe(constraints.maxLength);
    expect((await idsFound(h, byHelper("charge", [order]))).items).toEqual([started.executionId]);
  });
});
