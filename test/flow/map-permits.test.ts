/**
 * The seam of MAP (docs/steps.md "MAP") and flow control (docs/connectors.md "Limits"): a MAP's
 * Gateway items through a limited connector take one permit per attempt, as a step's attempt does —
 * the item's row parks without an attempt when none is free, is woken by a release, its permit's
 * lease is the item's, and its permit goes back when it settles. Real D1 (both shards: test/flow is
 * in SHARD_1_FILES), the real consumer, the harness's clock, queue and destination.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { getWorkflow, type StoredWorkflow } from "../../src/definitions/store";
import { dueParkedItems, readScopeState } from "../../src/ledger/connector-permits";
import { WAKE_GRACE_MS } from "../../src/steps/cron";
import { callApp, executionStatus, harness, unique, type Harness } from "../steps/helpers";
import { limitedPayments, putJson, WS } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

/** entry → charge: a MAP over the order's lines, each line a charge through `connector`, keyed by order and SKU. */
function mapThrough(connector: string, concurrency: number) {
  return {
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "charge",
        type: "MAP",
        config: {
          items: "= payload.order.lines",
          as: "line",
          concurrency,
          maxItems: 100,
          onItemFailure: "fail",
          step: {
            type: "GATEWAY",
            config: {
              connector,
              operation: "charge",
              method: "POST",
              path: "/charges",
              keyFields: { order: "= payload.order.id & '-' & line.sku" },
              body: "= { 'order': payload.order.id, 'sku': line.sku }",
            },
          },
        },
      },
    ],
    edges: [{ from: "received", to: "charge" }],
  };
}

/** A connector `name` with `limits` and a MAP through it, saved in `dev`. */
async function limitedMap(h: Harness, limits: Record<string, unknown>, concurrency: number): Promise<{ name: string; wf: StoredWorkflow }> {
  const name = unique("limmap");
  const saved = await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, limits));
  if (saved.status !== 201) throw new Error(`connector not saved: ${JSON.stringify(saved.body)}`);
  const wf = mapThrough(name, concurrency);
  const put = await putJson(h, `/v1/workflows/${wf.id}`, wf);
  if (put.status !== 201) throw new Error(`workflow not saved: ${JSON.stringify(put.body)}`);
  return { name, wf: (await getWorkflow(env.DB, WS, wf.id))! };
}

const order = (n: number, id = unique("O")) => ({
  order: { id, lines: Array.from({ length: n }, (_, i) => ({ sku: `S${i}` })) },
});

interface ItemRow {
  item_index: number;
  row_key: string;
  state: string;
  attempt: number;
  retry_base: number;
  parked_until: number | null;
}

async function itemsOf(executionId: string): Promise<ItemRow[]> {
  const { results } = await env.DB.prepare(
    "SELECT item_index, row_key, state, attempt, retry_base, parked_until FROM work_items WHERE execution_id = ?1 ORDER BY item_index",
  )
    .bind(executionId)
    .all<ItemRow>();
  return results;
}

async function attemptsOf(executionId: string, rowKey: string): Promise<Array<{ attempt: number; outcome: string }>> {
  const { results } = await env.DB.prepare(
    "SELECT attempt, outcome FROM step_attempts WHERE execution_id = ?1 AND vertex_id = ?2 ORDER BY epoch",
  )
    .bind(executionId, rowKey)
    .all<{ attempt: number; outcome: string }>();
  return results;
}

/**
 * The destination's calls in flight, seen two ways at each call's start: its own count (every call
 * held a few ms, so concurrent deliveries overlap at the destination) and the permits table's live count.
 */
function meter(h: Harness, name: string) {
  let inFlight = 0;
  let max = 0;
  let maxLive = 0;
  const inner = h.dest.fetch;
  h.rt.fetch = async (input, init) => {
    inFlight++;
    max = Math.max(max, inFlight);
    try {
      const state = await readScopeState(env.DB, WS, name, h.clock.now());
      maxLive = Math.max(maxLive, state?.inFlight ?? 0);
      await new Promise((r) => setTimeout(r, 15));
      return await inner(input, init);
    } finally {
      inFlight--;
    }
  };
  return { max: () => max, maxLive: () => maxLive, now: () => inFlight };
}

/**
 * Deliver every due message at once (each its own delivery, as concurrent consumers would), then
 * the next due ones, the clock moved to them; retries asked for go back in the queue.
 */
async function drainTogether(h: Harness, maxRounds = 200): Promise<void> {
  for (let round = 0; round < maxRounds && h.queue.pending.length > 0; round++) {
    const next = Math.min(...h.queue.pending.map((m) => m.dueAt));
    if (next > h.clock.now()) h.clock.t = next;
    const due = h.queue.pending.filter((m) => m.dueAt <= h.clock.now());
    h.queue.pending = h.queue.pending.filter((m) => m.dueAt > h.clock.now());
    await Promise.all(
      due.map(async (m) => {
        const result = await h.deliver([m.body]);
        for (const d of result.retryDelays) h.queue.pending.push({ body: m.body, dueAt: h.clock.now() + (d ?? 0) * 1000 });
      }),
    );
  }
}

describe("a MAP through a limited connector", () => {
  it("20 items at concurrency 10 through a connector limited to 3: never more than 3 in flight, each item done on attempt 1", async () => {
    const h = harness();
    const { name, wf } = await limitedMap(h, { concurrency: 3 }, 10);
    const m = meter(h, name);
    const id = await h.start(wf, order(20));
    await drainTogether(h);
    expect(await executionStatus(id)).toBe("COMPLETED");
    // The destination's own record and the permits table: at most 3 at once — and the limit was reached.
    expect(m.max()).toBe(3);
    expect(m.maxLive()).toBeLessThanOrEqual(3);
    expect(h.dest.effects).toHaveLength(20);
    // Waiting burnt nothing: every item completed on attempt 1, with one attempt row (its real one).
    const items = await itemsOf(id);
    expect(items).toHaveLength(20);
    for (const item of items) {
      expect(item).toMatchObject({ state: "COMPLETED", attempt: 1, retry_base: 0 });
      expect(await attemptsOf(id, item.row_key)).toEqual([{ attempt: 1, outcome: "completed" }]);
    }
    // The scope held some back (its waiters parked) and nothing is left held or waiting.
    const state = await readScopeState(env.DB, WS, name, h.clock.now());
    expect(state!.heldBack).toBeGreaterThan(0);
    expect(state).toMatchObject({ inFlight: 0, waiting: 0 });
  });

  it("a waiting item parks its own row (not the MAP's step) without an attempt, and a release wakes it", async () => {
    const h = harness();
    const { name, wf } = await limitedMap(h, { concurrency: 1 }, 2);
    const id = await h.start(wf, order(2));
    await h.deliver([h.queue.take()[0]!.body]); // the MAP's claim: both items started
    const [first, second] = h.queue.take();
    let open!: () => void;
    h.dest.hold = new Promise<void>((resolve) => (open = resolve));
    const running = h.deliver([first!.body]);
    for (let i = 0; i < 100 && h.dest.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await h.deliver([second!.body]);
    const parked = (await itemsOf(id))[second!.body.item!]!;
    expect(parked).toMatchObject({ state: "EXECUTING", attempt: 0, retry_base: 0 });
    expect(parked.parked_until).toBeGreaterThan(h.clock.now());
    // A redundant message at the same instant misses the claim and opens no attempt for the parked row (found by the model).
    // (Its attempt is 0 here: the phantom row broke the claim batch's CHECK; at attempt ≥ 1 it was an extra attempt row.)
    const again = await h.deliver([second!.body]);
    expect(again.retryDelays).toEqual([1]); // bounced to its time (early), not a crashed claim batch
    expect(await attemptsOf(id, parked.row_key)).toEqual([]);
    expect(await readScopeState(env.DB, WS, name, h.clock.now())).toMatchObject({ inFlight: 1, waiting: 1 });
    // The MAP's step is not the one waiting.
    const map = await env.DB.prepare("SELECT attempt, permit_wait FROM steps WHERE execution_id = ?1 AND vertex_id = 'charge'")
      .bind(id)
      .first<{ attempt: number; permit_wait: string | null }>();
    expect(map).toMatchObject({ attempt: 1, permit_wait: null });
    // The first call returns: its release wakes the waiter at once (a message due now), before its timed wake-up.
    h.dest.hold = null;
    open();
    await running;
    expect(h.queue.pending.some((m) => m.body.item === second!.body.item && m.dueAt === h.clock.now())).toBe(true);
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(await attemptsOf(id, parked.row_key)).toEqual([{ attempt: 1, outcome: "completed" }]);
  });

  it("an item's permit wait shows in the trace as a step's does, and its late timed wake-up is not a stopped redelivery", async () => {
    const h = harness();
    const { name, wf } = await limitedMap(h, { concurrency: 1 }, 2);
    const id = await h.start(wf, order(2));
    await h.deliver([h.queue.take()[0]!.body]);
    const [first, second] = h.queue.take();
    let open!: () => void;
    h.dest.hold = new Promise<void>((resolve) => (open = resolve));
    const running = h.deliver([first!.body]);
    for (let i = 0; i < 100 && h.dest.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await h.deliver([second!.body]); // parks
    const [timed] = h.queue.take(); // its timed wake-up, held back
    expect(timed!.body).toMatchObject({ item: second!.body.item, wake: "permit" });
    const itemOf = async () => {
      const trace = (await (await callApp(h, "GET", `/v1/executions/${id}`)).json()) as {
        steps: Array<{
          vertexId: string;
          map: { items: Array<{ index: number; permitWait: { text: string; grantedAt: string | null } | null }> };
        }>;
      };
      return trace.steps.find((s) => s.vertexId === "charge")!.map.items.find((i) => i.index === second!.body.item)!;
    };
    expect((await itemOf()).permitWait).toMatchObject({
      grantedAt: null,
      text: expect.stringMatching(`^waiting for a permit of ${name} since .*: every permit is in flight`),
    });
    h.clock.advance(500); // before its timed wake-up (1 s): the release wakes it
    h.dest.hold = null;
    open();
    await running; // the release wakes it
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect((await itemOf()).permitWait).toMatchObject({
      grantedAt: expect.any(String),
      text: expect.stringMatching(new RegExp(`^waited 0\\.5 s for ${name}: every permit is in flight`)),
    });
    const firstItem =
      (await itemOf()) &&
      (await env.DB.prepare("SELECT permit_wait FROM work_items WHERE execution_id = ?1 AND item_index = ?2")
        .bind(id, first!.body.item)
        .first<{ permit_wait: string | null }>());
    expect(firstItem!.permit_wait).toBeNull(); // it never waited
    // Its timed wake-up arrives after it ran: acked, not counted as a stopped redelivery.
    h.clock.t = Math.max(h.clock.now(), timed!.dueAt);
    const late = await h.deliver([timed!.body]);
    expect(late.explicitAcks).toHaveLength(1);
    const counted = await env.DB.prepare("SELECT redeliveries_stopped FROM executions WHERE id = ?1")
      .bind(id)
      .first<{ redeliveries_stopped: number }>();
    expect(counted!.redeliveries_stopped).toBe(0);
  });

  it("an item chained at the instant a waiter parked or was woken opens no attempt for that waiter", async () => {
    // Found by the model (seed 4): the chained claim's attempt row went to every item EXECUTING and touched at that instant.
    const h = harness({}, { chain: true });
    const { wf } = await limitedMap(h, { concurrency: 1 }, 2);
    const id = await h.start(wf, order(3));
    await drainTogether(h);
    expect(await executionStatus(id)).toBe("COMPLETED");
    for (const item of await itemsOf(id)) {
      expect(item).toMatchObject({ state: "COMPLETED", attempt: 1 });
      expect(await attemptsOf(id, item.row_key)).toEqual([{ attempt: 1, outcome: "completed" }]);
    }
  });

  it("a parked item's wake-up a little early is retried at its time; a redundant one is acked", async () => {
    const h = harness();
    const { wf } = await limitedMap(h, { rate: "1/h" }, 2);
    const id = await h.start(wf, order(2));
    await h.deliver([h.queue.take()[0]!.body]);
    const [first, second] = h.queue.take();
    await h.deliver([first!.body]); // the hour's one token
    await h.deliver([second!.body]); // parks
    const parked = (await itemsOf(id))[second!.body.item!]!;
    expect(parked).toMatchObject({ state: "EXECUTING", attempt: 0 });
    const [wake] = h.queue.take();
    h.clock.t = parked.parked_until! - 400;
    const early = await h.deliver([wake!.body]);
    expect(early.explicitAcks).toEqual([]);
    expect(early.retryDelays).toEqual([1]);
    // Long before its time (a release's earlier wake-up, say): acked — its own wake-up is on its way.
    h.clock.t = parked.parked_until! - 10_000;
    const redundant = await h.deliver([wake!.body]);
    expect(redundant.explicitAcks).toHaveLength(1);
    expect(await attemptsOf(id, parked.row_key)).toEqual([]);
  });

  it("a dead item worker's permit returns when the item's lease expires, not before", async () => {
    const h = harness();
    const { wf } = await limitedMap(h, { concurrency: 1 }, 2);
    const id = await h.start(wf, order(2));
    await h.deliver([h.queue.take()[0]!.body]);
    const [dead, live] = h.queue.take();
    // The first item's worker hangs at the destination for good (a worker that died mid-call).
    let reached = false;
    void h.deliver([dead!.body], { fetch: () => ((reached = true), new Promise<Response>(() => {})) });
    for (let i = 0; i < 100 && !reached; i++) await new Promise((r) => setTimeout(r, 10));
    expect(reached).toBe(true);
    await h.deliver([live!.body]);
    const liveKey = `charge#${live!.body.item}`;
    const waiting = (await itemsOf(id))[live!.body.item!]!;
    expect(waiting).toMatchObject({ state: "EXECUTING", attempt: 0 });
    // Were its wake-up lost, the cron's wake-up task would re-send it once it is a grace period late.
    const ref = { executionId: id, vertexId: "charge", item: live!.body.item };
    expect(await dueParkedItems(env.DB, waiting.parked_until! + WAKE_GRACE_MS - 1, WAKE_GRACE_MS, 200)).not.toContainEqual(ref);
    expect(await dueParkedItems(env.DB, waiting.parked_until! + WAKE_GRACE_MS, WAKE_GRACE_MS, 200)).toContainEqual(ref);
    // Its wake-ups within the dead worker's lease (30 s) find the permit held.
    for (let i = 0; i < 3; i++) {
      const [wake] = h.queue.take();
      h.clock.t = wake!.dueAt;
      await h.deliver([wake!.body]);
      expect((await itemsOf(id))[live!.body.item!]).toMatchObject({ state: "EXECUTING", attempt: 0 });
    }
    expect(h.clock.now()).toBeLessThan(1_900_000_030_000);
    expect(await attemptsOf(id, liveKey)).toEqual([]);
    h.clock.t = 1_900_000_030_000;
    await h.drain();
    expect((await itemsOf(id))[live!.body.item!]).toMatchObject({ state: "COMPLETED", attempt: 1 });
    expect(await attemptsOf(id, liveKey)).toEqual([{ attempt: 1, outcome: "completed" }]);
    expect((await itemsOf(id))[dead!.body.item!]!.state).toBe("EXECUTING");
  });
});
