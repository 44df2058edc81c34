/**
 * The heartbeat with real timers: every other step test disables it (`heartbeatEveryMs: 0`) and
 * drives a fake clock. Here the runtime's clock is `Date.now()`, which in workerd advances across
 * I/O and timers, so the lease is really extended while the destination holds the request.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { claimAndLoad } from "../../src/ledger";
import { chargeWorkflow, DEST, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "steps-heartbeat";
const LEASE_MS = 500;
const HEARTBEAT_MS = 100;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Poll `probe` until it returns a value `ok` accepts; fail loudly after `timeoutMs`. */
async function until<T>(what: string, probe: () => Promise<T> | T, ok: (value: T) => boolean, timeoutMs = 3_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(value)}`);
    await sleep(20);
  }
}

async function leaseOf(executionId: string): Promise<{ state: string; epoch: number; lease_until: number | null }> {
  return (await env.DB.prepare("SELECT state, epoch, lease_until FROM steps WHERE execution_id = ?1 AND vertex_id = 'charge'")
    .bind(executionId)
    .first<{ state: string; epoch: number; lease_until: number | null }>())!;
}

describe("the heartbeat during a long Gateway call", () => {
  it("moves lease_until past the claim's lease while the destination holds the request: no concurrent claim takes the step", async () => {
    let executionId = "";
    let call: { at: number; leaseUntil: number | null } | undefined;
    const h: Harness = harness({
      now: () => Date.now(),
      leaseMs: LEASE_MS,
      heartbeatEveryMs: HEARTBEAT_MS,
      // The destination notes when the request arrived and the lease it saw, then holds it.
      fetch: async (input, init) => {
        call = { at: Date.now(), leaseUntil: (await leaseOf(executionId)).lease_until };
        return h.dest.fetch(input, init);
      },
    });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    h.clock.t = Date.now() - 1_000; // the step is due now on the runtime's real clock
    executionId = await h.start(wf, { order: { id: unique("H"), total: 3 } });
    const [msg] = h.queue.take();
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    const running = h.deliver([msg!.body]);
    try {
      await until(
        "the request to reach the destination",
        () => h.dest.requests.length,
        (n) => n === 1,
      );
      const { at, leaseUntil } = call!;
      // The claim happened before the request arrived: its lease ends no later than this.
      const claimLeaseEndsBy = at + LEASE_MS;
      expect(leaseUntil).not.toBeNull();
      expect(leaseUntil!).toBeLessThanOrEqual(claimLeaseEndsBy);

      // While the call is held, the heartbeat pushes the lease past the claim's.
      const extended = await until(
        "the heartbeat to extend the lease",
        () => leaseOf(executionId),
        (row) => (row.lease_until ?? 0) > claimLeaseEndsBy,
      );
      expect(extended).toMatchObject({ state: "EXECUTING", epoch: 1 });

      // Well after the claim's lease would have run out, another worker tries to claim the step.
      await until(
        "the claim's lease to be long over",
        () => Date.now(),
        (now) => now >= claimLeaseEndsBy + 150,
      );
      const rival = await claimAndLoad(env.DB, { executionId, vertexId: "charge" }, Date.now(), LEASE_MS);
      expect(rival.claimed).toBeNull();
      const during = await leaseOf(executionId);
      expect(during).toMatchObject({ state: "EXECUTING", epoch: 1 });
      expect(during.lease_until!).toBeGreaterThan(Date.now());
      expect(h.dest.requests).toHaveLength(1);
    } finally {
      release(); // also when an assertion failed: never leave the worker hanging
    }
    const result = await running;
    expect(result.explicitAcks).toHaveLength(1);
    expect((await stepsOf(executionId)).charge).toMatchObject({ state: "COMPLETED", epoch: 1, attempt: 1 });
    expect(h.dest.effects).toHaveLength(1);
  });
});

async function itemLeaseOf(executionId: string): Promise<{ state: string; epoch: number; lease_until: number | null } | null> {
  return env.DB.prepare("SELECT state, epoch, lease_until FROM work_items WHERE execution_id = ?1 AND row_key = 'refund#0'")
    .bind(executionId)
    .first<{ state: string; epoch: number; lease_until: number | null }>();
}

describe("the heartbeat during a MAP item's long call (src/ledger/work-row-writes.ts, the item's row fence)", () => {
  it("moves the item's lease_until past its claim's lease while the destination holds the request", async () => {
    const h: Harness = harness({ now: () => Date.now(), leaseMs: LEASE_MS, heartbeatEveryMs: HEARTBEAT_MS });
    const wf = await seedWorkflow(WS, {
      id: unique("wf"),
      vertices: [
        { id: "received", type: "ENTRY_POINT", config: {} },
        {
          id: "refund",
          type: "MAP",
          config: {
            items: "= payload.order.lines",
            as: "line",
            step: {
              type: "GATEWAY",
              config: {
                method: "POST",
                url: `${DEST}/payments/charges`,
                headers: { "Idempotency-Key": "= 'refund-' & payload.order.id & '-' & line.sku" },
                body: "= { 'sku': line.sku, 'amount': 1 }",
              },
            },
          },
        },
      ],
      edges: [{ from: "received", to: "refund" }],
    });
    h.clock.t = Date.now() - 1_000;
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    const executionId = await h.start(wf, { order: { id: unique("M"), lines: [{ sku: "A" }] } });
    const running: Promise<unknown>[] = [];
    try {
      // Deliver every message the run sends until the item's request is held at the destination.
      await until(
        "the item's request to reach the destination",
        () => {
          for (const m of h.queue.take()) running.push(h.deliver([m.body]));
          return h.dest.requests.length;
        },
        (n) => n === 1,
        5_000,
      );
      const claimLeaseEndsBy = Date.now() + LEASE_MS;
      const extended = await until(
        "the heartbeat to extend the item's lease",
        () => itemLeaseOf(executionId),
        (row) => (row?.lease_until ?? 0) > claimLeaseEndsBy,
      );
      expect(extended).toMatchObject({ state: "EXECUTING", epoch: 1 });
    } finally {
      release();
    }
    await Promise.all(running);
    expect(h.dest.effects).toHaveLength(1);
  });
});
