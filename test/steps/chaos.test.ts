import { beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { reap } from "../../src/steps/reaper";
import { env } from "cloudflare:test";
import { deliveredEnv } from "../helpers/shards";
import { DEST, executionStatus, harness, seedWorkflow, unique, type Harness, type HarnessOptions } from "./helpers";

/** Small seeded PRNG (mulberry32) so a failing run can be replayed. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The run logs every crash and lost send it provokes; keep the test output readable.
beforeEach(() => {
  vi.spyOn(console, "error").mockImplementation(() => {});
  vi.spyOn(console, "warn").mockImplementation(() => {});
});

/** The chaos workflow: charge, then ship, both keyed, then a transform of both answers. */
function chaosWorkflow(): WorkflowDefinitionInput {
  return {
    id: unique("wf"),
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: {} },
      {
        id: "charge",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}/payments/charges`,
          headers: { "Idempotency-Key": "= $idempotencyKey('charge', payload.order)" },
          body: { order: "= payload.order" },
          retry: { maxAttempts: 20, backoff: "exponential", initialDelayMs: 500, maxDelayMs: 4_000 },
        },
      },
      {
        id: "ship",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}/shipping/labels`,
          headers: { "Idempotency-Key": "= $idempotencyKey('ship', payload.order)" },
          body: { order: "= payload.order" },
          retry: { maxAttempts: 20, backoff: "exponential", initialDelayMs: 500, maxDelayMs: 4_000 },
        },
      },
      { id: "done", type: "TRANSFORM", config: { output: "= [steps.charge.body.id, steps.ship.body.id]" } },
    ],
    edges: [
      { from: "entry", to: "charge" },
      { from: "charge", to: "ship" },
      { from: "ship", to: "done" },
    ],
  } as WorkflowDefinitionInput;
}

/** Crash AFTER the side effect and BEFORE the settle (the worst place to die), 30 % of the time. */
function chaosHarness(random: () => number, chaining: boolean, options: HarnessOptions = {}): Harness {
  return harness(
    {
      leaseMs: 5_000,
      overdueMs: 30_000,
      random,
      afterRun: () => {
        if (random() < 0.3) throw new Error("chaos: worker killed");
      },
    },
    chaining ? { ...options, chain: { leaseMs: 5_000 } } : options,
  );
}

/**
 * Starts 12 executions on `h` and runs its queue under chaos — duplicate deliveries, lost sends,
 * 503s, crashes — until every execution finished (or 400 rounds); answers the execution ids.
 */
async function runUnderChaos(h: Harness, workspace: string, random: () => number, seed: number): Promise<string[]> {
  const wf = await seedWorkflow(workspace, chaosWorkflow(), h.rt.db);
  const status = (id: string) => executionStatus(id, h.rt.db);
  const ids: string[] = [];
  for (let i = 0; i < 12; i++) ids.push(await h.start(wf, { order: `chaos-${seed}-${workspace}-${i}` }));
  for (let i = 0; i < 6; i++) {
    h.dest.fault("/payments/charges", 503);
    h.dest.fault("/shipping/labels", 503);
  }

  for (let round = 0; round < 400; round++) {
    const due = h.queue.pending.filter((m) => m.dueAt <= h.clock.now());
    if (due.length === 0) {
      if (h.queue.pending.length > 0) h.clock.t = Math.min(...h.queue.pending.map((m) => m.dueAt));
      else {
        const statuses = await Promise.all(ids.map(status));
        if (statuses.every((s) => s !== "RUNNING")) break;
        h.clock.advance(31_000); // everything in flight was lost: let the reaper find it
        await reap(h.rt);
      }
      continue;
    }
    h.queue.pending = h.queue.pending.filter((m) => !due.includes(m));
    if (random() < 0.15) h.queue.failNext = 1; // the next send after a commit is lost
    // Deliver the due messages concurrently, some of them twice (at-least-once delivery).
    const deliveries = due.flatMap((m) => (random() < 0.25 ? [m, m] : [m]));
    const results = await Promise.all(deliveries.map((m) => h.deliver([m.body])));
    results.forEach((r, i) => {
      for (const d of r.retryDelays) h.queue.pending.push({ body: deliveries[i]!.body, dueAt: h.clock.now() + (d ?? 0) * 1000 });
    });
    h.clock.advance(100);
  }
  return ids;
}

/** Every execution completed, and each destination key's effect happened exactly once, whatever the number of calls. */
async function expectNothingLostNothingDoubled(h: Harness, ids: string[]): Promise<void> {
  const statuses = await Promise.all(ids.map((id) => executionStatus(id, h.rt.db)));
  expect(statuses).toEqual(ids.map(() => "COMPLETED"));
  const byKey = new Map<string, number>();
  for (const e of h.dest.effects) byKey.set(`${e.path} ${e.key}`, (byKey.get(`${e.path} ${e.key}`) ?? 0) + 1);
  expect(byKey.size).toBe(ids.length * 2);
  expect([...byKey.values()].every((n) => n === 1)).toBe(true);
  // And the chaos did happen: more calls than effects.
  expect(h.dest.requests.length).toBeGreaterThan(h.dest.effects.length);
}

describe("chaos", () => {
  // With chaining on (src/steps/chain.ts), the trigger runs the first step inline and each settle claims
  // the next one: a crash there leaves a claimed step for the reaper, under the chained lease.
  it.each([{ chaining: false }, { chaining: true }])(
    "with crashes mid-step, duplicate deliveries, lost sends and 503s, every execution completes, each key's effect once " +
      "(chaining: $chaining)",
    async ({ chaining }) => {
      const seed = 20261202;
      const random = prng(seed);
      const h = chaosHarness(random, chaining);
      const ids = await runUnderChaos(h, "steps-chaos", random, seed);
      await expectNothingLostNothingDoubled(h, ids);
      // Chaining really happened: fewer queue messages than one per step (seed 20261202: 14 with chaining, 46 without).
      if (chaining) expect(h.queue.sends).toBeLessThan(ids.length * 3);
    },
  );

  // SPEC section 13: two workspaces on two shards (each its own database) under chaos at once.
  it("two workspaces on two shards at once: nothing lost, nothing doubled, and neither's rows on the other's shard", async () => {
    const seed = 20261206;
    const random = prng(seed);
    const real = deliveredEnv(env);
    const shards = [real.DB, real.DB_1] as const;
    const runs = await Promise.all(
      (["steps-chaos-a", "steps-chaos-b"] as const).map(async (workspace, shard) => {
        const h = chaosHarness(random, shard === 1, { database: shards[shard] });
        return { h, shard, ids: await runUnderChaos(h, workspace, random, seed) };
      }),
    );
    for (const { h, shard, ids } of runs) {
      await expectNothingLostNothingDoubled(h, ids);
      const elsewhere = shards[1 - shard]!;
      const found = await elsewhere
        .prepare("SELECT count(*) AS n FROM executions WHERE id IN (SELECT value FROM json_each(?1))")
        .bind(JSON.stringify(ids))
        .first<number>("n");
      expect(found).toBe(0);
    }
  });
});
