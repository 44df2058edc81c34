/**
 * A FAILED execution superseded by a reuse after failure (`previous_execution_id` on the new one,
 * `superseded_by` on the old): the links the start-over gate and the history sweep's removal guard
 * read. Real D1, the real start batch, consumer, start over and removal, on the harness's clock.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { removeExecutions, selectDueChains } from "../../src/ledger";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, unique, type Harness } from "../steps/helpers";
import { MINUTE, trigger } from "./triggers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const WS = "dev";

/** A charge workflow whose trigger is its `customer` (window 90 s, reuse after failure), kept 2 minutes once finished. */
function reusableCharge(): WorkflowDefinitionInput {
  const def = chargeWorkflow(unique("wf"));
  def.vertices[0] = {
    id: "received",
    type: "ENTRY_POINT",
    config: { idempotencyFields: ["customer"], dedupeWindow: "90s", reusePolicy: "after-failure" },
  };
  return { ...def, history: { completed: "2m", failed: "2m", cancelled: "2m" } } as WorkflowDefinitionInput;
}

/** The customer's first charge, FAILED for good (three 500s). */
async function failedFirst(h: Harness) {
  const wf = await seedWorkflow(WS, reusableCharge());
  const customer = unique("c");
  const payload = { customer, order: { id: unique("O"), total: 7 } };
  const first = await trigger(h, wf, payload);
  h.dest.fault("/payments/charges", 500, 3);
  await h.drain();
  expect(await executionStatus(first.executionId)).toBe("FAILED");
  return { wf, payload, failed: first.executionId };
}

describe("a superseded execution", () => {
  it("is never started over, also once the execution that superseded it completed", async () => {
    const h = harness();
    const { wf, payload, failed } = await failedFirst(h);
    const next = await trigger(h, wf, payload);
    expect(next.deduplicated).toBe(false);
    await h.drain();
    expect(await executionStatus(next.executionId)).toBe("COMPLETED");
    expect(await env.DB.prepare("SELECT superseded_by FROM executions WHERE id = ?1").bind(failed).first<string>("superseded_by")).toBe(
      next.executionId,
    );
    // Nothing of the trigger runs now: only the supersede refuses.
    await expect(h.startOver(wf, payload, failed)).rejects.toMatchObject({
      code: "execution-superseded",
      detail: expect.stringContaining(next.executionId),
    });
    expect(await env.DB.prepare("SELECT count(*) AS n FROM executions WHERE started_over_from = ?1").bind(failed).first<number>("n")).toBe(
      0,
    );
  });

  it("selected for removal, then followed by a reuse after failure: the removal's re-check under the lock removes nothing", async () => {
    const h = harness();
    const { wf, payload, failed } = await failedFirst(h);
    // Past its retention and its window: the sweep selects it, alone in its chain.
    h.clock.advance(2 * MINUTE + 1);
    const selection = await selectDueChains(env.DB, h.clock.now(), 100);
    const chain = selection.chains.find((c) => c.some((e) => e.id === failed))!;
    expect(chain.map((e) => e.id)).toEqual([failed]);
    // Between the selection and the removal, the trigger comes again and reuses the identity, following it.
    const next = await trigger(h, wf, payload);
    expect(next.deduplicated).toBe(false);
    expect(
      await env.DB.prepare("SELECT previous_execution_id FROM executions WHERE id = ?1")
        .bind(next.executionId)
        .first<string>("previous_execution_id"),
    ).toBe(failed);
    const removal = await removeExecutions(env.DB, [failed], h.clock.now(), "retention");
    expect(removal.executions).toBe(0);
    expect(await executionStatus(failed)).toBe("FAILED");
    expect((await env.DB.prepare("PRAGMA foreign_key_check").all()).results).toEqual([]);
  });
});
