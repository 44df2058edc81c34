/**
 * The reaper's re-sends of an overdue DISPATCHED step back off per step (docs/steps.md "Reaper"):
 * the first is due `overdueMs` after `available_at`, after the n-th the next waits
 * `min(overdueMs · 2^n, maxResendWaitMs)`; the trace counts them (`resends`).
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { reap } from "../../src/steps/reaper";
import { readTrace } from "../../src/steps/trace";
import { chargeWorkflow, harness, seedWorkflow, stepsOf, unique } from "./helpers";

const WS = "steps-reaper-backoff";
const OVERDUE = 60_000;

/** Advance to just before and just after `waitMs`: the first sweep re-sends nothing, the second one step. */
async function expectNextResendAfter(h: ReturnType<typeof harness>, waitMs: number): Promise<void> {
  h.clock.advance(waitMs - 1_000);
  expect((await reap(h.rt)).overdue).toBe(0);
  h.clock.advance(1_000);
  expect((await reap(h.rt)).overdue).toBe(1);
  expect(h.queue.take()).toHaveLength(1); // the re-sent message, lost again (a backlog)
}

async function charge(id: string) {
  const trace = await readTrace(env.DB, WS, id);
  return trace!.steps.find((s) => s.vertexId === "charge")!;
}

describe("the reaper's re-send back-off", () => {
  it("spaces the re-sends of one step 1·, 2·, 4· the overdue bound, and the trace counts them", async () => {
    const h = harness({ overdueMs: OVERDUE });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
    h.queue.take(); // the first message is lost

    await expectNextResendAfter(h, OVERDUE); // 1st re-send: overdue once
    expect((await charge(id)).resends).toBe(1);
    await expectNextResendAfter(h, 2 * OVERDUE); // 2nd: twice the bound later
    await expectNextResendAfter(h, 4 * OVERDUE); // 3rd: four times
    const step = await charge(id);
    expect(step.resends).toBe(3);
    expect(step.state).toBe("DISPATCHED");
    expect(step.nextResendAt).toBe(new Date(h.clock.now() + 8 * OVERDUE).toISOString());

    // Within the 7 bounds that passed since the first message, a sweep every bound would have sent 7.
    expect(h.queue.take()).toHaveLength(0);
  });

  it("caps the wait at maxResendWaitMs; once the message arrives the step completes once and the count stays", async () => {
    const h = harness({ overdueMs: OVERDUE, maxResendWaitMs: 150_000 });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
    h.queue.take();
    await expectNextResendAfter(h, OVERDUE);
    await expectNextResendAfter(h, 2 * OVERDUE);
    await expectNextResendAfter(h, 150_000); // 4 · 60 s capped at 150 s
    await expectNextResendAfter(h, 150_000);

    // The step's message finally arrives: it completes once, the count stays on record.
    h.queue.pending.push({ body: { executionId: id, vertexId: "charge" }, dueAt: h.clock.now() });
    await h.drain();
    const step = await charge(id);
    expect(step.state).toBe("COMPLETED");
    expect(step.resends).toBe(4);
    expect(step.nextResendAt).toBeNull();
    expect(h.dest.effects).toHaveLength(1);
    const row = await env.DB.prepare("SELECT next_resend_at FROM steps WHERE execution_id = ?1")
      .bind(id)
      .first<{ next_resend_at: number | null }>();
    expect(row!.next_resend_at).toBeNull();
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
  });
});
