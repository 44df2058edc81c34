/**
 * Statements per compensation step (docs/steps.md "Measured budgets", issue 45 "Measured"): counted
 * with the counting D1 wrapper (test/helpers/counting-d1.ts) over the real ledger, through the
 * harness — charge (refunded) → ship; ship fails for good; the refund runs as an undo step.
 *
 * - the settle that fails the last step and decides COMPENSATING: the step's own round trips (claim
 *   batch, key persist, settle batch — the decision is the settle batch's `finish` statement, the
 *   undo rows its trigger's insert) + 1 read of the undo to send (`dispatchedUndos`) + the
 *   `execution.failed` outbox read every failed finish makes (src/notifications/messages.ts);
 * - an undo step, first attempt with a key: claim batch, key persist, settle batch — 3 round trips;
 * - an undo step whose response was lost (its key persisted): claim batch + settle batch — 2.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { countingD1 } from "../helpers/counting-d1";
import { DEST, executionStatus, harness, seedWorkflow, unique } from "../steps/helpers";

const WS = "dev";

const gateway = (id: string, path: string, compensate: boolean) => ({
  id,
  type: "GATEWAY",
  config: {
    method: "POST",
    url: `${DEST}${path}`,
    headers: { "Idempotency-Key": `= '${id}-' & payload.order.id` },
    body: "= { 'order': payload.order.id }",
    retry: { maxAttempts: 2, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
    ...(compensate
      ? {
          compensate: {
            method: "POST",
            url: `${DEST}/payments/refunds`,
            headers: { "Idempotency-Key": "= 'refund-' & payload.order.id" },
            body: "= { 'charge': output.body.id, 'order': payload.order.id }",
            retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
          },
        }
      : {}),
  },
});

const order = (): WorkflowDefinitionInput =>
  ({
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      gateway("charge", "/payments/charges", true),
      gateway("ship", "/shipping/labels", false),
    ],
    edges: [
      { from: "received", to: "charge" },
      { from: "charge", to: "ship" },
    ],
  }) as unknown as WorkflowDefinitionInput;

const isUndo = (body: unknown) => typeof (body as { undo?: unknown }).undo === "number";

describe("compensation budgets (counting D1)", () => {
  beforeEach(() => {
    for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
  });
  afterEach(() => vi.restoreAllMocks());

  it("the deciding settle: two reads more than a step's; an undo: 3 round trips (settle batch 7), 2 with its key persisted", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const wf = await seedWorkflow(WS, order());
    const id = await h.start(wf, { order: { id: unique("O") } });
    await h.deliver(h.queue.take().map((m) => m.body)); // charge
    expect(await executionStatus(id)).toBe("RUNNING");

    // ship fails for good (400): its settle decides COMPENSATING; the first undo's message goes after the commit.
    h.dest.fault("/shipping/labels", 400);
    const [ship] = h.queue.take();
    counting.reset();
    await h.deliver([ship!.body]);
    expect(await executionStatus(id)).toBe("COMPENSATING");
    const decided = counting.calls.map((c) => ({ kind: c.kind, statements: c.sql.length }));
    // claim batch, key persist, settle batch (its `finish` decides; the trigger inserts the undo rows), the undo
    // read (src/steps/compensate.ts `startCompensation`), the execution.failed outbox read (src/notifications/messages.ts:
    // a failed or compensating finish reads its row, a message only when the workspace wants the event).
    expect(decided.map((c) => c.kind)).toEqual(["batch", "batch", "batch", "statement", "statement"]);
    expect(decided[2]!.statements).toBe(5);
    expect(counting.calls[3]!.sql[0]).toContain("kind = 'undo'");
    expect(counting.calls[4]!.sql[0]).toContain("notification_outbox");

    // The undo, first attempt: the refund's response is lost (made, then a 500) — claim, persist, retry scheduled.
    h.dest.fault("/payments/refunds", 500, 1, { afterCommit: true });
    const [undo] = h.queue.take();
    expect(isUndo(undo!.body)).toBe(true);
    counting.reset();
    await h.deliver([undo!.body]);
    const firstAttempt = counting.calls.map((c) => ({ kind: c.kind, statements: c.sql.length }));
    // claim batch, key persist, the retry's batch (attempt end, the row DISPATCHED again at its backoff).
    expect(firstAttempt.map((c) => c.kind)).toEqual(["batch", "batch", "batch"]);
    const claimStatements = firstAttempt[0]!.statements;
    const persistStatements = firstAttempt[1]!.statements;
    // The step's claim batch over the undo row (8: no attempt opened — its row is written when it ends, migrations/0041)
    // and its key persist (2: the key on the row, its first send).
    expect([claimStatements, persistStatements, firstAttempt[2]!.statements]).toEqual([8, 2, 5]);

    // The second attempt, same key (persisted): claim batch + settle batch, the execution COMPENSATED.
    const [again] = h.queue.take();
    h.clock.t += 1_000;
    counting.reset();
    await h.deliver([again!.body]);
    const secondAttempt = counting.calls.map((c) => ({ kind: c.kind, statements: c.sql.length }));
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(secondAttempt.map((c) => c.kind)).toEqual(["batch", "batch"]);
    expect(secondAttempt[0]!.statements).toBe(claimStatements);
    // The settle batch: fenced-out record, counters, attempt end, settle, burn the undone key, start the next undo, finish.
    expect(secondAttempt[1]!.statements).toBe(7);
    // One refund in effect, under its own key, however many sends.
    expect(h.dest.effects.filter((e) => e.path === "/payments/refunds").map((e) => e.key)).toHaveLength(1);

    console.info(
      `compensation budget: decision ${JSON.stringify(decided)}; undo first attempt ${JSON.stringify(firstAttempt)} ` +
        `(claim ${claimStatements}, persist ${persistStatements}); undo with its key persisted ${JSON.stringify(secondAttempt)}`,
    );
  });

  it("an undo step's first attempt that succeeds: claim batch, key persist, settle batch — 3 round trips", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const wf = await seedWorkflow(WS, order());
    const id = await h.start(wf, { order: { id: unique("O") } });
    await h.deliver(h.queue.take().map((m) => m.body));
    h.dest.fault("/shipping/labels", 400);
    await h.deliver(h.queue.take().map((m) => m.body));
    const [undo] = h.queue.take();
    counting.reset();
    await h.deliver([undo!.body]);
    expect(await executionStatus(id)).toBe("COMPENSATED");
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch", "batch"]);
    expect(counting.calls[2]!.sql.length).toBe(7);
    expect(counting.roundTrips()).toBe(3);
  });
});
