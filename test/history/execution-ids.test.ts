/**
 * Issue 41, finding 1 — history × identity: an execution id is never given twice. Every window's
 * id is derived from the trigger identity and the window's start (src/ingress/identity.ts), never
 * the bare identity, so a trigger sent again after its earlier run was swept AND its tombstone
 * expired gets an id no run had: state keyed by the id (a wait's key, a destination key built from
 * `execution.id`) cannot reach the old run's. Real D1, the real start batch, sweep, consumer and
 * event delivery, on the harness's clock.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { alternateExecutionId, deriveIdentity, windowExecutionId } from "../../src/ingress/identity";
import { sweepExpiredIdentities } from "../../src/ledger";
import { executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "../steps/helpers";
import { sendEvent } from "../steps/wait-helpers";
import { sweepAt } from "./helpers";
import { MINUTE, shipsOnPayment, shortLived, trigger } from "./triggers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const WS = "dev";

/** Sweeps until the removed executions' tombstones are gone too: the id would then be free under the old rule. */
async function sweepPastTombstones(h: Harness): Promise<void> {
  h.clock.advance(2 * MINUTE + 1);
  const removal = await sweepAt(h.clock.now());
  expect(removal.report.removed).toBeGreaterThanOrEqual(1);
  h.clock.advance(2 * MINUTE + 1);
  await sweepAt(h.clock.now());
  await sweepExpiredIdentities(env.DB, h.clock.now());
}

describe("an execution id is never given twice (issue 41, finding 1)", () => {
  it("a trigger sent again after its run was swept and its tombstone expired gets an id never given before", async () => {
    const h = harness();
    const wf = await seedWorkflow(
      WS,
      shortLived(
        unique("ids"),
        [{ id: "charge", type: "TRANSFORM", config: { output: { key: "= 'charge-' & execution.id" } } }],
        [{ from: "entry", to: "charge" }],
      ),
    );
    const given = new Set<string>();
    const keys = new Set<string>();
    const customer = unique("c");
    for (let run = 0; run < 3; run++) {
      const started = await trigger(h, wf, { customer, order: `o${run}` });
      expect(started.deduplicated).toBe(false);
      expect(given.has(started.executionId)).toBe(false);
      given.add(started.executionId);
      await h.drain();
      expect(await executionStatus(started.executionId)).toBe("COMPLETED");
      const key = (JSON.parse((await stepsOf(started.executionId)).charge!.output!) as { key: string }).key;
      expect(keys.has(key)).toBe(false);
      keys.add(key);
      await sweepPastTombstones(h);
      // Nothing of the run is left to say its id was taken.
      for (const table of ["executions", "execution_tombstones"]) {
        const row = await env.DB.prepare(`SELECT count(*) AS n FROM ${table} WHERE id = ?1`)
          .bind(started.executionId)
          .first<{ n: number }>();
        expect(row!.n).toBe(0);
      }
    }
  });

  it("every window's id is derived from the identity and the window's start, the first window's too", async () => {
    const h = harness();
    const wf = await seedWorkflow(
      WS,
      shortLived(unique("first"), [{ id: "done", type: "TRANSFORM", config: { output: {} } }], [{ from: "entry", to: "done" }]),
    );
    const customer = unique("c");
    const identity = await deriveIdentity({
      workspace: WS,
      workflowId: wf.workflowId,
      entryVertexId: "entry",
      kind: "fields",
      material: [customer],
      scope: "production",
    });
    const at = h.clock.now();
    const first = await trigger(h, wf, { customer });
    expect(first.executionId).not.toBe(identity);
    expect(first.executionId).toBe(await windowExecutionId(identity, at));
  });

  it("a clock stepped back to a window start already used: the alternate id, not the taken one", async () => {
    const h = harness();
    const wf = await seedWorkflow(
      WS,
      shortLived(unique("back"), [{ id: "done", type: "TRANSFORM", config: { output: {} } }], [{ from: "entry", to: "done" }]),
    );
    const customer = unique("c");
    const at = h.clock.now();
    const first = await trigger(h, wf, { customer });
    await h.drain();
    expect(await executionStatus(first.executionId)).toBe("COMPLETED");
    // The identity row gone (swept), and the clock back where the first window began.
    await env.DB.prepare("DELETE FROM execution_identities WHERE execution_id = ?1").bind(first.executionId).run();
    h.clock.t = at;
    const again = await trigger(h, wf, { customer });
    expect(again.deduplicated).toBe(false);
    expect(again.executionId).not.toBe(first.executionId);
    // The same again once the first is only a tombstone: still not its id.
    await h.drain();
    h.clock.advance(2 * MINUTE + 1);
    expect((await sweepAt(h.clock.now())).report.removed).toBe(2);
    await env.DB.prepare("DELETE FROM execution_identities WHERE workspace = ?1 AND workflow_id = ?2").bind(WS, wf.workflowId).run();
    h.clock.t = at;
    const third = await trigger(h, wf, { customer });
    expect(third.deduplicated).toBe(false);
    expect([first.executionId, again.executionId]).not.toContain(third.executionId);
  });

  it("under the alternate id, an entry edge that reads execution.id is planned with the alternate id", async () => {
    const h = harness();
    const customer = unique("c");
    const workflowId = unique("edge");
    const identity = await deriveIdentity({
      workspace: WS,
      workflowId,
      entryVertexId: "entry",
      kind: "fields",
      material: [customer],
      scope: "production",
    });
    const at = h.clock.now();
    const windowId = await windowExecutionId(identity, at);
    // `shape` runs only for the window's id: the alternate id's plan skips it.
    const wf = await seedWorkflow(
      WS,
      shortLived(
        workflowId,
        [{ id: "shape", type: "TRANSFORM", config: { output: { id: "= execution.id" } } }],
        [{ from: "entry", to: "shape", when: `= execution.id = '${windowId}'` }],
      ),
    );
    const first = await trigger(h, wf, { customer });
    expect(first).toMatchObject({ executionId: windowId, status: "RUNNING" });
    await h.drain();
    await env.DB.prepare("DELETE FROM execution_identities WHERE execution_id = ?1").bind(first.executionId).run();
    h.clock.t = at; // the clock stepped back onto the first window's start
    const again = await trigger(h, wf, { customer });
    expect(again.deduplicated).toBe(false);
    expect(again.executionId).not.toBe(windowId);
    expect(again.status).toBe("COMPLETED");
    expect((await stepsOf(again.executionId)).shape!.state).toBe("SKIPPED");
  });

  it("the alternate id depends on the claim token: two claims at one instant never share it", async () => {
    const identity = "a".repeat(64);
    const a = await alternateExecutionId(identity, 1, "t1");
    expect(a).not.toBe(await alternateExecutionId(identity, 1, "t2"));
    expect(a).not.toBe(await windowExecutionId(identity, 1));
  });
});

describe("a wait of a later run never takes the earlier run's event (issue 41, finding 1's repro)", () => {
  it("order B of the same customer, after order A was swept and its tombstone expired, waits for its own payment", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, shipsOnPayment(unique("ship")));
    const customer = unique("c");
    const a = await trigger(h, wf, { customer, order: "A" });
    await h.drain(); // the wait registers and parks
    const { answer } = await sendEvent(h, { name: "payment.confirmed", match: "A", id: unique("evt"), data: { paid: "A" } });
    expect(answer.resumed).toEqual([a.executionId]);
    await h.drain();
    expect(await executionStatus(a.executionId)).toBe("COMPLETED");

    await sweepPastTombstones(h);
    const b = await trigger(h, wf, { customer, order: "B" });
    expect(b.deduplicated).toBe(false);
    expect(b.executionId).not.toBe(a.executionId);
    await h.drain();
    // B waits for B's payment: it did not ship on A's.
    expect(await executionStatus(b.executionId)).toBe("RUNNING");
    const steps = await stepsOf(b.executionId);
    expect(steps.paid!.state).toBe("EXECUTING");
    expect(steps.ship).toBeUndefined();
    const paid = await sendEvent(h, { name: "payment.confirmed", match: "B", id: unique("evt"), data: { paid: "B" } });
    expect(paid.answer.resumed).toEqual([b.executionId]);
    await h.drain();
    expect(JSON.parse((await stepsOf(b.executionId)).ship!.output!)).toEqual({ shipped: "B", payment: { paid: "B" } });
  });
});
