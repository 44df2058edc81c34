/**
 * The settle's chained claim is made at the successor's insert (src/ledger/step-settle.ts `decideStep`)
 * and only there: a successor already on record — DISPATCHED, its message sent, maybe delivered
 * to another worker — is never claimed by a later decision of it, even one whose own claim
 * condition holds (the settle's fence, no other chained claim in the batch). The chain-claim test
 * (test/ledger/chain-claim.test.ts) only decides again rows on record as EXECUTING; this one is
 * the case an upsert would get wrong. Real D1, rows the engine wrote.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { claimAndLoad, settleAndDispatch } from "../../src/ledger";
import { descendantsInOrder } from "../../src/steps/graph";
import { chargeWorkflow, harness, seedWorkflow, stepsOf, unique } from "../steps/helpers";

const WS = "steps-chaining"; // granted the charge's Worker secret (vitest.config.ts)

describe("the chained claim of a settle and a successor on record", () => {
  it("a decision made again with a chain offer leaves a DISPATCHED successor as it is: not claimed, not re-dated", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 4 } });
    h.queue.take();
    expect((await claimAndLoad(env.DB, { executionId: id, vertexId: "charge" }, h.clock.now(), 30_000)).claimed).toMatchObject({
      epoch: 1,
    });
    h.clock.advance(10);
    const settle = (chain: boolean) =>
      settleAndDispatch(env.DB, {
        fence: { executionId: id, vertexId: "charge", epoch: 1 },
        now: h.clock.now(),
        outcome: { state: "COMPLETED", output: "{}", nextVertices: ["done"] },
        request: null,
        backfill: [],
        descendants: descendantsInOrder(wf.definition, "charge"),
        ...(chain ? { chain: { candidates: ["done"], leaseMs: 30_000 } } : {}),
      });
    // The settle without a chain (the queue path): done is inserted DISPATCHED, its message goes out.
    expect(await settle(false)).toMatchObject({ settled: true, dispatched: ["done"], chained: null });
    const dispatched = (await stepsOf(id)).done!;
    expect(dispatched).toMatchObject({ state: "DISPATCHED", epoch: 0, attempt: 0 });
    // The same settle replayed at the same instant, now with a chain offer: its claim condition holds
    // (charge COMPLETED under its epoch, finished now; nothing claimed in this batch), but done is on record.
    expect(await settle(true)).toMatchObject({ settled: false, chained: null });
    expect((await stepsOf(id)).done).toEqual(dispatched);
    const attempts = await env.DB.prepare("SELECT count(*) AS n FROM step_attempts WHERE execution_id = ?1 AND vertex_id = 'done'")
      .bind(id)
      .first<number>("n");
    expect(attempts).toBe(0);
  });
});
