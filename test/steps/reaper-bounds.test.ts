import { env } from "cloudflare:test";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { claimAndLoad } from "../../src/ledger";
import { reap } from "../../src/steps/reaper";
import { chargeWorkflow, harness, seedWorkflow, unique, type Harness } from "./helpers";

const WS = "steps-reaper-bounds";

beforeEach(async () => {
  vi.spyOn(console, "warn").mockImplementation(() => {});
  // The reaper sweeps the whole per-file database: each test starts without the earlier tests' steps.
  await env.DB.batch([env.DB.prepare("DELETE FROM step_events"), env.DB.prepare("DELETE FROM steps")]);
});

/** The executions the reaper re-sent a message for since the last call (the messages are taken, not delivered). */
const resentExecutions = (h: Harness): string[] => h.queue.take().map((m) => m.body.executionId);

async function chargeStates(ids: string[]): Promise<string[]> {
  const states: string[] = [];
  for (const id of ids) {
    const row = await env.DB.prepare("SELECT state FROM steps WHERE execution_id = ?1 AND vertex_id = 'charge'")
      .bind(id)
      .first<{ state: string }>();
    states.push(row!.state);
  }
  return states;
}

describe("the expired-lease sweep", () => {
  it("handles at most reapLimit steps per run, the longest-expired first; the next run handles the rest", async () => {
    const h = harness({ leaseMs: 5_000, reapLimit: 3 });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const t0 = h.clock.now();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await h.start(wf, { order: { id: unique("L"), total: i } }));
    h.queue.take();
    // Five workers claim and die. Claimed in reverse order, so insertion order is NOT expiry order:
    // ids[4]'s lease expires first, ids[0]'s last.
    for (let i = 0; i < 5; i++) {
      const claim = await claimAndLoad(env.DB, { executionId: ids[i]!, vertexId: "charge" }, t0 + (5 - i) * 1_000, 5_000);
      expect(claim.claimed?.epoch).toBe(1);
    }
    h.clock.t = t0 + 60_000; // every lease has expired

    expect(await reap(h.rt)).toEqual({ expiredLeases: 3, overdue: 0 });
    expect(resentExecutions(h).sort()).toEqual([ids[2], ids[3], ids[4]].sort());
    expect(await chargeStates(ids)).toEqual(["EXECUTING", "EXECUTING", "DISPATCHED", "DISPATCHED", "DISPATCHED"]);

    expect(await reap(h.rt)).toEqual({ expiredLeases: 2, overdue: 0 });
    expect(resentExecutions(h).sort()).toEqual([ids[0], ids[1]].sort());
    expect(await chargeStates(ids)).toEqual(Array(5).fill("DISPATCHED"));

    expect(await reap(h.rt)).toEqual({ expiredLeases: 0, overdue: 0 });
    const events = await env.DB.prepare(
      "SELECT execution_id FROM step_events WHERE type = 'lease_expired' AND detail = 're-dispatched by the reaper'",
    ).all<{
      execution_id: string;
    }>();
    expect(events.results.map((e) => e.execution_id).sort()).toEqual([...ids].sort());
  });
});

describe("the overdue sweep", () => {
  it("handles at most reapLimit steps per run, the longest-overdue first, and never a step that is not overdue yet", async () => {
    const h = harness({ overdueMs: 60_000, reapLimit: 2 });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const t0 = h.clock.now();
    // Five steps whose messages were lost, started newest first (insertion order is NOT due order):
    // ids[4] has been due the longest.
    const overdue: string[] = [];
    for (let i = 0; i < 5; i++) {
      h.clock.t = t0 - i * 1_000;
      overdue.push(await h.start(wf, { order: { id: unique("D"), total: i } }));
    }
    // Two more that are due but not overdue at the sweeps below.
    h.clock.t = t0 + 90_000;
    const recent = [
      await h.start(wf, { order: { id: unique("D"), total: 5 } }),
      await h.start(wf, { order: { id: unique("D"), total: 6 } }),
    ];
    h.queue.take(); // every message is lost
    h.clock.t = t0 + 120_000;

    expect(await reap(h.rt)).toEqual({ expiredLeases: 0, overdue: 2 });
    expect(resentExecutions(h).sort()).toEqual([overdue[3], overdue[4]].sort());
    expect(await reap(h.rt)).toEqual({ expiredLeases: 0, overdue: 2 });
    expect(resentExecutions(h).sort()).toEqual([overdue[1], overdue[2]].sort());
    expect(await reap(h.rt)).toEqual({ expiredLeases: 0, overdue: 1 });
    expect(resentExecutions(h)).toEqual([overdue[0]]);
    // Room in the bound, yet the recent steps are not re-sent: they are not overdue.
    expect(await reap(h.rt)).toEqual({ expiredLeases: 0, overdue: 0 });
    expect(await chargeStates(recent)).toEqual(["DISPATCHED", "DISPATCHED"]);
  });
});
