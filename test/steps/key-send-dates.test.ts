/**
 * The first send of a destination key is dated once (migrations/0008): the retention guard counts
 * the destination's memory from it (src/steps/gateway/retention.ts). A later execution that sends
 * the same key again — through a chained start, whose insert's trigger records the send
 * (migrations/0024 `steps_key_sent_at_insert`), or through the first attempt's key persist
 * (src/ledger/key-sends.ts `upsertKeySend`) — must leave `first_sent_at` and `counted_from` as
 * they are: re-dating them would restart the guard's clock, and a key the destination has
 * forgotten would be sent as if it were still remembered.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { chargeWorkflow, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-key-send-dates";

/** entry → charge, its key declared with a retention (guarded): the guard reads its first send. */
const guardedCharge = () =>
  chargeWorkflow(unique("wf"), {
    headers: {},
    idempotencyKey: { value: "= $idempotencyKey('charge', payload.order.id)", retention: "1h" },
  });

async function sendsOf(key: string) {
  const { results } = await env.DB.prepare(
    `SELECT execution_id AS executionId, first_sent_at AS firstSentAt, counted_from AS countedFrom, guarded
     FROM destination_key_sends WHERE workspace = ?1 AND idempotency_key = ?2`,
  )
    .bind(WS, key)
    .all<{ executionId: string; firstSentAt: number; countedFrom: number; guarded: number }>();
  return results;
}

describe("a key's first send is never re-dated", () => {
  it("a chained start sending the key again (the start batch's trigger) keeps the first send's dates and acknowledgement", async () => {
    const h = harness({}, { chain: true });
    const wf = await seedWorkflow(WS, guardedCharge());
    const order = { id: unique("O"), total: 5 };
    const firstAt = h.clock.now();
    const first = await h.start(wf, { order });
    const key = (await stepsOf(first)).charge!.idempotency_key!;
    expect(key).toMatch(/^charge-/);
    expect(await sendsOf(key)).toEqual([{ executionId: first, firstSentAt: firstAt, countedFrom: firstAt, guarded: 1 }]);

    // An operator's acknowledgement moved where the retention counts from (src/ledger/operator.ts).
    const acknowledgedAt = firstAt + 60_000;
    await env.DB.prepare("UPDATE destination_key_sends SET counted_from = ?3 WHERE workspace = ?1 AND idempotency_key = ?2")
      .bind(WS, key, acknowledgedAt)
      .run();

    // The same order again 20 minutes later: the start batch inserts its charge claimed, with the same key.
    h.clock.advance(20 * 60_000);
    const second = await h.start(wf, { order });
    expect(second).not.toBe(first);
    expect((await stepsOf(second)).charge).toMatchObject({ state: "COMPLETED", idempotency_key: key });
    expect(await sendsOf(key)).toEqual([{ executionId: first, firstSentAt: firstAt, countedFrom: acknowledgedAt, guarded: 1 }]);
  });

  it("a step that persists the key again when it runs (the key persist's upsert) keeps the first send's dates", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, guardedCharge());
    const order = { id: unique("O"), total: 6 };
    const first = await h.start(wf, { order });
    await h.drain();
    const key = (await stepsOf(first)).charge!.idempotency_key!;
    const [sent] = await sendsOf(key);
    expect(sent).toMatchObject({ executionId: first, guarded: 1 });

    h.clock.advance(20 * 60_000);
    const second = await h.start(wf, { order });
    await h.drain();
    expect((await stepsOf(second)).charge).toMatchObject({ state: "COMPLETED", idempotency_key: key });
    expect(await sendsOf(key)).toEqual([sent]);
  });
});
