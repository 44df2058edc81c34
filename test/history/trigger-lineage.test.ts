/**
 * Issue 41, finding 2 — history × lineage: removing a trigger's earlier execution (the history
 * sweep, or an erasure) while a later window's execution of the same trigger still runs must not
 * let the trigger start a second live execution. The claim's one-live gate looks for a RUNNING
 * execution of the lineage named by the identity itself (`lineage_id` = the identity), never
 * through an execution's row that may be gone. Real D1, the real start batch, sweep, erasure,
 * consumer and event delivery, on the harness's clock.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { eraseExecution } from "../../src/history/erase";
import { sweepExpiredIdentities } from "../../src/ledger";
import { executionStatus, harness, seedWorkflow, unique, type Harness } from "../steps/helpers";
import { sendEvent } from "../steps/wait-helpers";
import { sweepAt } from "./helpers";
import { MINUTE, shipsOnPayment, trigger } from "./triggers";
import type { StoredWorkflow } from "../../src/definitions/store";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const WS = "dev";

async function live(wf: StoredWorkflow): Promise<string[]> {
  const { results } = await env.DB.prepare("SELECT id FROM executions WHERE workflow_id = ?1 AND status = 'RUNNING' ORDER BY id")
    .bind(wf.workflowId)
    .all<{ id: string }>();
  return results.map((r) => r.id);
}

async function lineageOf(id: string): Promise<string | null> {
  return env.DB.prepare("SELECT lineage_id FROM executions WHERE id = ?1").bind(id).first<string>("lineage_id");
}

async function identityOf(id: string): Promise<string | null> {
  return env.DB.prepare("SELECT identity FROM executions WHERE id = ?1").bind(id).first<string>("identity");
}

/** Order A of `customer`, paid and shipped (COMPLETED). */
async function completedOrder(h: Harness, wf: StoredWorkflow, customer: string, order: string): Promise<string> {
  const started = await trigger(h, wf, { customer, order });
  expect(started.deduplicated).toBe(false);
  await h.drain();
  await sendEvent(h, { name: "payment.confirmed", match: order, id: unique("evt") });
  await h.drain();
  expect(await executionStatus(started.executionId)).toBe("COMPLETED");
  return started.executionId;
}

/** Order `order` of `customer` started in a new window, parked on its payment (RUNNING for days). */
async function waitingOrder(h: Harness, wf: StoredWorkflow, customer: string, order: string): Promise<string> {
  const started = await trigger(h, wf, { customer, order });
  expect(started.deduplicated).toBe(false);
  await h.drain();
  expect(await executionStatus(started.executionId)).toBe("RUNNING");
  return started.executionId;
}

/** The sender re-sends after every window and identity row is gone: a duplicate of the live one, still one live. */
async function resendIsDuplicateOf(h: Harness, wf: StoredWorkflow, customer: string, liveId: string): Promise<void> {
  h.clock.advance(2 * MINUTE);
  await sweepExpiredIdentities(env.DB, h.clock.now());
  const again = await trigger(h, wf, { customer, order: "resent" });
  expect(again).toMatchObject({ executionId: liveId, deduplicated: true, status: "RUNNING" });
  expect(await live(wf)).toEqual([liveId]);
}

describe("one live execution per trigger once its earlier executions are removed (issue 41, finding 2)", () => {
  it("the first execution swept while a later window's execution waits: a re-send is a duplicate of the live one", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, shipsOnPayment(unique("swept")));
    const customer = unique("c");
    const first = await completedOrder(h, wf, customer, unique("A"));
    h.clock.advance(91_000); // past the first window
    const later = await waitingOrder(h, wf, customer, unique("B"));
    h.clock.advance(2 * MINUTE + 1);
    expect((await sweepAt(h.clock.now())).report.removed).toBe(1);
    expect(await executionStatus(first)).toBeUndefined();
    await resendIsDuplicateOf(h, wf, customer, later);
  });

  it("the first execution erased while a later window's execution waits: a re-send is a duplicate of the live one", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, shipsOnPayment(unique("erased")));
    const customer = unique("c");
    const first = await completedOrder(h, wf, customer, unique("A"));
    h.clock.advance(91_000);
    const later = await waitingOrder(h, wf, customer, unique("B"));
    expect(await eraseExecution(env.DB, undefined, WS, first, h.clock.now)).toMatchObject({ kind: "erased", erased: [first] });
    await resendIsDuplicateOf(h, wf, customer, later);
  });

  it("a lineage begun after its head was removed: still the identity's, still one live execution", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, shipsOnPayment(unique("after")));
    const customer = unique("c");
    const first = await completedOrder(h, wf, customer, unique("A"));
    h.clock.advance(2 * MINUTE + 1);
    expect((await sweepAt(h.clock.now())).report.removed).toBe(1);
    // The head and its tombstone gone, its identity row too: the trigger begins again from nothing.
    h.clock.advance(2 * MINUTE + 1);
    await sweepAt(h.clock.now());
    await sweepExpiredIdentities(env.DB, h.clock.now());
    expect(await env.DB.prepare("SELECT count(*) AS n FROM execution_tombstones WHERE id = ?1").bind(first).first<number>("n")).toBe(0);
    const orderB = unique("B");
    const later = await waitingOrder(h, wf, customer, orderB);
    // `lineage_id` names the identity, a value: no row is its head.
    expect(await lineageOf(later)).toBe(await identityOf(later));
    await resendIsDuplicateOf(h, wf, customer, later);
    // Once it finished, the next trigger starts anew, in the same lineage.
    await sendEvent(h, { name: "payment.confirmed", match: orderB, id: unique("evt") });
    await h.drain();
    expect(await executionStatus(later)).toBe("COMPLETED");
    h.clock.advance(1); // the row the re-send left ends 1 ms after it began
    const next = await trigger(h, wf, { customer, order: unique("C") });
    expect(next.deduplicated).toBe(false);
    expect(await lineageOf(next.executionId)).toBe(await identityOf(later));
  });
});
