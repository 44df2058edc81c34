/**
 * MAP (SPEC section 16, docs/steps.md "MAP"): a step over a list, each item a claimable row of its
 * own with its key from the item's business data — end to end, the races (every item settling at
 * once decides the MAP once; an item settle racing cancel; a stale item worker after a takeover),
 * a lost lease mid-MAP, operator retry of a failed MAP, the list's refusals, and the budgets.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { cancelExecution, MAP_ITEMS_PAGE, readExecutionChanges, readItemsPage, retryFailedStep } from "../../src/ledger";
import { itemsCursorAfter } from "../../src/steps/map-trace";
import { readTrace } from "../../src/steps/trace";
import { reap } from "../../src/steps/reaper";
import { countingD1 } from "../helpers/counting-d1";
import { dbOf } from "../helpers/shards";
import { callApp, DEST, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "steps-map";
const db = () => dbOf(env, WS);

interface MapOptions {
  concurrency?: number;
  maxItems?: number;
  onItemFailure?: "fail" | "continue";
  collect?: string;
  maxCollectBytes?: number;
  items?: string;
  url?: string;
}

/** entry → refund (a MAP over the order's lines, a Gateway per line keyed by order and SKU) → done. */
function refundLines(o: MapOptions = {}): WorkflowDefinitionInput {
  return {
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "refund",
        type: "MAP",
        config: {
          items: o.items ?? "= payload.order.lines",
          as: "line",
          concurrency: o.concurrency ?? 2,
          maxItems: o.maxItems ?? 100,
          onItemFailure: o.onItemFailure ?? "fail",
          ...(o.collect ? { collect: o.collect } : {}),
          ...(o.maxCollectBytes ? { maxCollectBytes: o.maxCollectBytes } : {}),
          step: {
            type: "GATEWAY",
            config: {
              method: "POST",
              url: o.url ?? `${DEST}/payments/charges`,
              headers: { "Idempotency-Key": "= 'refund-' & payload.order.id & '-' & line.sku" },
              body: "= { 'sku': line.sku, 'amount': line.amount }",
              retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 },
            },
          },
        },
      },
      { id: "done", type: "TRANSFORM", config: { output: "= steps.refund" } },
    ],
    edges: [
      { from: "received", to: "refund" },
      { from: "refund", to: "done" },
    ],
  } as unknown as WorkflowDefinitionInput;
}

const order = (n: number, id = unique("O")) => ({
  order: { id, lines: Array.from({ length: n }, (_, i) => ({ sku: `S${i}`, amount: 10 + i })) },
});

interface ItemRow {
  item_index: number;
  state: string;
  epoch: number;
  attempt: number;
  idempotency_key: string | null;
  collected: string | null;
  error: string | null;
}

async function itemsOf(executionId: string): Promise<ItemRow[]> {
  const { results } = await db()
    .prepare("SELECT * FROM work_items WHERE execution_id = ?1 ORDER BY item_index")
    .bind(executionId)
    .all<ItemRow>();
  return results;
}

async function attemptsOf(executionId: string, vertexId: string): Promise<Array<{ epoch: number; outcome: string }>> {
  const { results } = await db()
    .prepare("SELECT epoch, outcome FROM step_attempts WHERE execution_id = ?1 AND vertex_id = ?2 ORDER BY epoch")
    .bind(executionId, vertexId)
    .all<{ epoch: number; outcome: string }>();
  return results;
}

async function eventsOf(executionId: string, vertexId: string): Promise<string[]> {
  const { results } = await db()
    .prepare("SELECT type FROM step_events WHERE execution_id = ?1 AND vertex_id = ?2 ORDER BY id")
    .bind(executionId, vertexId)
    .all<{ type: string }>();
  return results.map((r) => r.type);
}

/** How many requests reached the destination with each key. */
function sendsPerKey(h: Harness): Map<string, number> {
  const sends = new Map<string, number>();
  for (const key of h.dest.keysSent("/payments/charges")) sends.set(key ?? "", (sends.get(key ?? "") ?? 0) + 1);
  return sends;
}

/** Effects (handler runs) per key at the destination: its ledger replays a key it has seen. */
function effectsPerKey(h: Harness): Map<string, number> {
  const effects = new Map<string, number>();
  for (const e of h.dest.effects) effects.set(e.key ?? "", (effects.get(e.key ?? "") ?? 0) + 1);
  return effects;
}

describe("MAP end to end", () => {
  it("runs every line with its own key, `concurrency` at a time, and passes the collected values on in list order", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 2 }));
    const payload = order(5);
    const id = await h.start(wf, payload);
    await h.drain(); // the MAP's first claim: the list persisted, two items started
    const steps = await stepsOf(id, db());
    expect(steps.refund!.state).toBe("COMPLETED");
    const output = JSON.parse(steps.refund!.output!) as Array<{ status: number; id: string }>;
    expect(output).toHaveLength(5);
    expect(output.every((o) => o.status === 201 && typeof o.id === "string")).toBe(true);
    // In list order: item i's answer is the charge made for line i.
    const items = await itemsOf(id);
    expect(items.map((i) => [i.item_index, i.state, i.idempotency_key])).toEqual(
      payload.order.lines.map((l, i) => [i, "COMPLETED", `refund-${payload.order.id}-${l.sku}`]),
    );
    for (const [i, o] of output.entries()) {
      const effect = h.dest.effects.find((e) => (e.body as { sku: string }).sku === `S${i}`)!;
      expect(o.id).toBe(`ch_${h.dest.effects.indexOf(effect) + 1}`);
    }
    expect(JSON.parse(steps.done!.output!)).toEqual(output);
    expect(await executionStatus(id, db())).toBe("COMPLETED");
    // Every key sent once, charged once.
    expect([...sendsPerKey(h).values()]).toEqual([1, 1, 1, 1, 1]);
    // Each item's attempt is on record under its row key.
    expect(await attemptsOf(id, "refund#3")).toEqual([{ epoch: 1, outcome: "completed" }]);
  });

  it("an empty list completes the MAP at once with []", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines());
    const id = await h.start(wf, order(0));
    await h.drain();
    const steps = await stepsOf(id, db());
    expect(steps.refund).toMatchObject({ state: "COMPLETED", output: "[]" });
    expect(await itemsOf(id)).toEqual([]);
    expect(await executionStatus(id, db())).toBe("COMPLETED");
  });

  it("a list that is not an array, or longer than maxItems, fails the MAP once with a clear error (not retried)", async () => {
    const h = harness({}, { workspace: WS });
    const notArray = await seedWorkflow(WS, refundLines({ items: "= payload.order" }));
    const a = await h.start(notArray, order(2));
    const tooLong = await seedWorkflow(WS, refundLines({ maxItems: 3 }));
    const b = await h.start(tooLong, order(4));
    await h.drain();
    const sa = await stepsOf(a, db());
    expect(sa.refund).toMatchObject({ state: "FAILED", attempt: 1 });
    expect(sa.refund!.error).toMatch(/`items` gave an object, not an array/);
    const sb = await stepsOf(b, db());
    expect(sb.refund).toMatchObject({ state: "FAILED", attempt: 1 });
    expect(sb.refund!.error).toMatch(/gave 4 items, over this MAP's maxItems of 3/);
    expect(await itemsOf(a)).toEqual([]);
    expect(await itemsOf(b)).toEqual([]);
    expect(h.dest.requests).toEqual([]);
    expect(await executionStatus(a, db())).toBe("FAILED");
  });

  it("collect picks from the item and its output; over maxCollectBytes the item fails, not retried", async () => {
    const h = harness({}, { workspace: WS });
    const picked = await seedWorkflow(WS, refundLines({ collect: "= { 'sku': line.sku, 'refund': body.id, 'at': index }" }));
    const a = await h.start(picked, order(2));
    const tooBig = await seedWorkflow(
      WS,
      refundLines({ collect: "= { 'sku': line.sku, 'pad': $pad('', 100, 'x') }", maxCollectBytes: 64 }),
    );
    const b = await h.start(tooBig, order(1));
    await h.drain();
    const out = JSON.parse((await stepsOf(a, db())).refund!.output!) as Array<{ sku: string; refund: string; at: number }>;
    expect(out.map((o) => [o.sku, o.at])).toEqual([
      ["S0", 0],
      ["S1", 1],
    ]);
    expect(out.every((o) => o.refund.startsWith("ch_"))).toBe(true);
    const [item] = await itemsOf(b);
    expect(item).toMatchObject({ state: "FAILED", attempt: 1 });
    expect(item!.error).toMatch(/over maxCollectBytes 64/);
    expect((await stepsOf(b, db())).refund!.state).toBe("FAILED");
  });

  it("onItemFailure continue: the MAP completes with the items in place and the failures listed", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(
      WS,
      refundLines({ onItemFailure: "continue", concurrency: 1, url: `= '${DEST}/' & (line.sku = 'S1' ? 'bad' : 'payments/charges')` }),
    );
    const id = await h.start(wf, order(3));
    await h.drain();
    const steps = await stepsOf(id, db());
    expect(steps.refund!.state).toBe("COMPLETED");
    const output = JSON.parse(steps.refund!.output!) as { items: unknown[]; failed: Array<{ index: number; error: string }> };
    expect(output.items).toHaveLength(3);
    expect(output.items[1]).toBeNull();
    expect(output.failed.map((f) => f.index)).toEqual([1]);
    expect(output.failed[0]!.error).toMatch(/400/);
    expect(await executionStatus(id, db())).toBe("COMPLETED");
  });
});

describe("MAP and the overview's counters", () => {
  it("a redelivered item message is stopped and counted (redeliveries), with its event under the item's row key", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 1 }));
    const id = await h.start(wf, order(1));
    await h.deliver(h.queue.take().map((m) => m.body));
    const [item] = h.queue.take();
    await h.deliver([item!.body]);
    await h.drain();
    expect(await executionStatus(id, db())).toBe("COMPLETED");
    const before = h.dest.requests.length;
    const again = await h.deliver([item!.body]);
    expect(again.explicitAcks).toHaveLength(1);
    expect(h.dest.requests).toHaveLength(before);
    const { redeliveries_stopped } = (await db()
      .prepare("SELECT redeliveries_stopped FROM executions WHERE id = ?1")
      .bind(id)
      .first<{ redeliveries_stopped: number }>())!;
    expect(redeliveries_stopped).toBe(1);
    expect(await eventsOf(id, "refund#0")).toEqual(["redelivery_dropped"]);
  });
});

describe("MAP races", () => {
  it("every item settling at once decides the MAP once: one wake, one decision, the successor once", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 4 }));
    const id = await h.start(wf, order(4));
    await h.deliver(h.queue.take().map((m) => m.body)); // the MAP's first claim
    const itemMessages = h.queue.take();
    expect(itemMessages.map((m) => m.body.item)).toEqual([0, 1, 2, 3]);
    // Every item claimed and calling before any settles; then all settle together.
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    const running = Promise.all(itemMessages.map((m) => h.deliver([m.body])));
    while (h.dest.requests.length < 4) await new Promise((r) => setTimeout(r, 5));
    release();
    await running;
    await h.drain();
    const steps = await stepsOf(id, db());
    expect(steps.refund!.state).toBe("COMPLETED");
    expect((JSON.parse(steps.refund!.output!) as unknown[]).length).toBe(4);
    // The MAP was claimed twice: its first claim (parked) and the one decision after the last item.
    expect(await attemptsOf(id, "refund")).toEqual([
      { epoch: 1, outcome: "slept" },
      { epoch: 2, outcome: "completed" },
    ]);
    expect(steps.done!.state).toBe("COMPLETED");
    expect(await executionStatus(id, db())).toBe("COMPLETED");
  });

  it("items that all settle between the MAP's read and its park still wake it: the park leaves it claimable", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 2 }));
    const id = await h.start(wf, order(2));
    let raced = false;
    // After the MAP's first claim persisted its list and sent its items' messages, before it parks:
    // every item runs and settles. Their settles find the MAP not parked, so none can wake it.
    await h.deliver(
      h.queue.take().map((m) => m.body),
      {
        afterRun: async (step) => {
          if (raced || step.vertexId !== "refund") return;
          raced = true;
          await h.deliver(h.queue.take().map((m) => m.body));
        },
      },
    );
    expect(raced).toBe(true);
    expect((await itemsOf(id)).map((i) => i.state)).toEqual(["COMPLETED", "COMPLETED"]);
    await h.drain(); // the park left the MAP claimable and sent its message at once
    expect((await stepsOf(id, db())).refund!.state).toBe("COMPLETED");
    expect(await executionStatus(id, db())).toBe("COMPLETED");
  });

  it("an item settle racing cancel is fenced out: recorded, nothing started after, the not-started items cancelled", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 1 }));
    const id = await h.start(wf, order(3));
    await h.deliver(h.queue.take().map((m) => m.body));
    const [first] = h.queue.take();
    let release!: () => void;
    h.dest.hold = new Promise<void>((r) => (release = r));
    const running = h.deliver([first!.body]);
    while (h.dest.requests.length < 1) await new Promise((r) => setTimeout(r, 5));
    const cancel = await cancelExecution(db(), WS, id, h.clock.now());
    expect(cancel.cancelled).toBe(true);
    release();
    await running;
    const items = await itemsOf(id);
    expect(items.map((i) => i.state)).toEqual(["CANCELLED", "CANCELLED", "CANCELLED"]);
    expect(await eventsOf(id, "refund#0")).toEqual(["cancelled", "fenced_out"]);
    expect(h.queue.pending).toEqual([]);
    expect(h.dest.requests).toHaveLength(1);
    const { fenced_out_writes } = (await db()
      .prepare("SELECT fenced_out_writes FROM executions WHERE id = ?1")
      .bind(id)
      .first<{ fenced_out_writes: number }>())!;
    expect(fenced_out_writes).toBe(1);
    expect(await executionStatus(id, db())).toBe("CANCELLED");
  });

  it("a stale item worker after a takeover is fenced out; the takeover sends the same key; charged once", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 1 }));
    const id = await h.start(wf, order(2));
    await h.deliver(h.queue.take().map((m) => m.body));
    const [first] = h.queue.take();
    // Worker A stalls after the side effect, past its lease.
    let resume!: () => void;
    const stalled = new Promise<void>((r) => (resume = r));
    let stalls = 1;
    const slow = h.deliver([first!.body], {
      afterRun: async () => {
        if (stalls-- > 0) await stalled;
      },
    });
    while (h.dest.requests.length < 1) await new Promise((r) => setTimeout(r, 5));
    h.clock.advance(h.rt.leaseMs + 1);
    await h.deliver([first!.body]); // worker B takes over (epoch 2) and settles
    const settledByB = (await itemsOf(id))[0];
    h.clock.advance(1000);
    resume();
    await slow;
    const items = await itemsOf(id);
    // A's late settle changed nothing on the item (its finish time, output and state are B's).
    expect(items[0]).toEqual(settledByB);
    expect(items[0]).toMatchObject({ state: "COMPLETED", epoch: 2 });
    expect(await eventsOf(id, "refund#0")).toEqual(["lease_expired", "fenced_out"]);
    expect(await attemptsOf(id, "refund#0")).toEqual([
      { epoch: 1, outcome: "lost" },
      { epoch: 2, outcome: "completed" },
    ]);
    const key = items[0]!.idempotency_key!;
    expect(sendsPerKey(h).get(key)).toBe(2);
    expect(effectsPerKey(h).get(key)).toBe(1);
    await h.drain();
    expect(await executionStatus(id, db())).toBe("COMPLETED");
  });
});

describe("MAP recovery and operator actions", () => {
  it("a lost lease mid-MAP re-runs only the unsettled items; no settled item is sent again", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 3 }));
    const id = await h.start(wf, order(6));
    await h.deliver(h.queue.take().map((m) => m.body));
    const started = h.queue.take();
    // Item 0 settles; items 1 and 2 die after their side effects (their messages lost).
    await h.deliver([started[0]!.body]);
    const die = () => {
      throw new Error("worker died after the side effect");
    };
    await h.deliver([started[1]!.body], { afterRun: die });
    await h.deliver([started[2]!.body], { afterRun: die });
    // (the crashed messages' retries are lost: the harness only re-queues what a drain delivers)
    const before = sendsPerKey(h);
    h.clock.advance(h.rt.leaseMs + 1);
    const reaped = await reap(h.rt);
    expect(reaped.expiredLeases).toBe(2);
    await h.drain();
    const items = await itemsOf(id);
    expect(items.every((i) => i.state === "COMPLETED")).toBe(true);
    const after = sendsPerKey(h);
    // Item 0 (and item 3, started by its settle before the crash) never sent again; 1 and 2 re-sent once each.
    expect(after.get(items[0]!.idempotency_key!)).toBe(before.get(items[0]!.idempotency_key!));
    expect(after.get(items[1]!.idempotency_key!)).toBe(2);
    expect(after.get(items[2]!.idempotency_key!)).toBe(2);
    expect([...effectsPerKey(h).values()].every((n) => n === 1)).toBe(true);
    expect(effectsPerKey(h).size).toBe(6);
    expect(await executionStatus(id, db())).toBe("COMPLETED");
  });

  it("an operator retry of a failed MAP re-runs only the failed items, with the same keys", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 1 }));
    const id = await h.start(wf, order(3));
    await h.deliver(h.queue.take().map((m) => m.body));
    // Item 0 completes; item 1 is refused (400, not retried): the MAP stops and fails; item 2 never starts.
    await h.deliver(h.queue.take().map((m) => m.body));
    h.dest.fault("/payments/charges", 400);
    await h.drain();
    let steps = await stepsOf(id, db());
    expect(steps.refund!.state).toBe("FAILED");
    expect(steps.refund!.error).toMatch(/item 1 failed/);
    let items = await itemsOf(id);
    expect(items.map((i) => i.state)).toEqual(["COMPLETED", "FAILED", "PENDING"]);
    expect(await executionStatus(id, db())).toBe("FAILED");
    const keys = items.map((i) => i.idempotency_key);
    const before = sendsPerKey(h);

    const retried = await retryFailedStep(db(), WS, { executionId: id, vertexId: "refund" }, h.clock.now());
    expect(retried.retried).toBe(true);
    await h.queue.send({ executionId: id, vertexId: "refund" }); // what the retry route sends after the commit
    await h.drain();
    steps = await stepsOf(id, db());
    expect(steps.refund!.state).toBe("COMPLETED");
    items = await itemsOf(id);
    expect(items.map((i) => i.state)).toEqual(["COMPLETED", "COMPLETED", "COMPLETED"]);
    expect(items.slice(0, 2).map((i) => i.idempotency_key)).toEqual(keys.slice(0, 2));
    const after = sendsPerKey(h);
    expect(after.get(keys[0]!)).toBe(before.get(keys[0]!)); // the done item was not sent again
    expect(after.get(keys[1]!)).toBe(2); // the failed one once more, same key
    expect(await executionStatus(id, db())).toBe("COMPLETED");
  });
});

describe("MAP budgets (counting D1)", () => {
  it("an item through the queue: claim batch and a settle batch of at most 7 statements (key persisted)", async () => {
    const counting = countingD1(db());
    const h = harness({ db: counting.db }, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 1 }));
    await h.start(wf, order(3));
    await h.deliver(h.queue.take().map((m) => m.body));
    const [first] = h.queue.take();
    counting.reset();
    await h.deliver([first!.body]);
    // claim batch, key persist, settle batch (+ the next item's message).
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch", "batch"]);
    expect(counting.calls[2]!.sql.length).toBeLessThanOrEqual(7);
  });

  it("100 items at concurrency 10 with chaining send no more queue messages than items", async () => {
    const h = harness({}, { workspace: WS, chain: true });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 10, maxItems: 100 }));
    const id = await h.start(wf, order(100));
    await h.drain(500);
    expect(await executionStatus(id, db())).toBe("COMPLETED");
    expect(h.queue.sends).toBeLessThanOrEqual(100);
    expect(effectsPerKey(h).size).toBe(100);
  });
});

describe("MAP and the change stream", () => {
  it("each item's attempts are changes of the execution, under the item's row key (item progress on /events)", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 2 }));
    const id = await h.start(wf, order(3));
    await h.drain();
    const { changes } = await readExecutionChanges(db(), WS, id, [0, 0], 100);
    const items = changes.filter((c) => c.kind === "attempt" && c.vertexId.startsWith("refund#"));
    expect(new Set(items.map((c) => (c as { vertexId: string }).vertexId))).toEqual(new Set(["refund#0", "refund#1", "refund#2"]));
    expect(items.every((c) => (c as { outcome: string }).outcome === "completed")).toBe(true);
  });
});

describe("MAP trace", () => {
  it("a MAP step lists its items: counts by state and the first page (index, state, attempts, key, output)", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 2 }));
    const id = await h.start(wf, order(3));
    await h.drain();
    const trace = (await readTrace(db(), WS, id))!;
    const refund = trace.steps.find((s) => s.vertexId === "refund")!;
    expect(refund.map).toMatchObject({ total: 3, completed: 3, failed: 0, pending: 0, nextCursor: null });
    expect(refund.map!.items.map((i) => [i.index, i.state, i.attempts.length])).toEqual([
      [0, "COMPLETED", 1],
      [1, "COMPLETED", 1],
      [2, "COMPLETED", 1],
    ]);
    const first = refund.map!.items[0]!;
    expect(first.idempotencyKey).toMatch(/^refund-.*-S0$/);
    expect(first.item).toEqual({ sku: "S0", amount: 10 });
    expect(first.output).toMatchObject({ status: 201 });
    expect(first.attempts[0]).toMatchObject({ outcome: "completed", idempotencyKey: first.idempotencyKey });
    // Other steps carry no map; the items' attempts are not the MAP step's own.
    expect(trace.steps.find((s) => s.vertexId === "done")!.map).toBeNull();
    expect(refund.attempts.map((a) => a.outcome)).toEqual(["slept", "completed"]);
  });

  it("the trace of a 1,000-item MAP reads one page of items; the items route's pages read the rest", async () => {
    const h = harness({}, { workspace: WS });
    const wf = await seedWorkflow(WS, refundLines({ concurrency: 1, maxItems: 1000 }));
    const id = await h.start(wf, order(1000));
    await h.deliver(h.queue.take().map((m) => m.body)); // the list persisted, item 0 started
    // Every item settled as if run (their rows and an attempt each), straight in SQL: this reads, it runs nothing.
    await db().batch([
      db()
        .prepare(
          `UPDATE work_items SET state = 'COMPLETED', epoch = 1, attempt = 1, lease_until = NULL, finished_at = ?2, updated_at = ?2,
                  output = json_object('status', 201, 'body', json_object('id', 'ch_' || item_index, 'pad', printf('%.500c', 'x'))),
                  collected = json_object('status', 201), idempotency_key = 'refund-' || item_index
           WHERE execution_id = ?1`,
        )
        .bind(id, h.clock.now()),
      db()
        .prepare(
          `INSERT INTO step_attempt_rows (execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, idempotency_key)
           SELECT execution_id, row_key, 1, 1, 'completed', ?2, ?2, idempotency_key FROM work_items WHERE execution_id = ?1
           ON CONFLICT DO UPDATE SET outcome = 'completed', finished_at = ?2`,
        )
        .bind(id, h.clock.now()),
    ]);
    const counting = countingD1(db());
    const trace = (await readTrace(counting.db, WS, id))!;
    const refund = trace.steps.find((s) => s.vertexId === "refund")!;
    expect(refund.map).toMatchObject({ total: 1000, completed: 1000 });
    expect(refund.map!.items).toHaveLength(MAP_ITEMS_PAGE);
    expect(refund.map!.items.every((i) => i.attempts.length === 1)).toBe(true);
    expect(counting.roundTrips()).toBe(1);
    // One page: 100 items of ~600 bytes of output each, their attempts; not 1,000.
    expect(counting.bytesRead()).toBeLessThan(150_000);
    // The rest, page by page after the trace's cursor.
    let after = itemsCursorAfter(refund.map!.nextCursor!)!;
    let seen = refund.map!.items.length;
    for (let pages = 0; pages < 20 && after !== null; pages++) {
      const page = (await readItemsPage(db(), WS, id, "refund", after, MAP_ITEMS_PAGE))!;
      expect(page.items[0]!.index).toBe(after + 1);
      seen += page.items.length;
      expect(page.attempts).toHaveLength(Math.min(page.items.length + 1, 1000 - after - 1));
      after = page.nextAfter ?? (null as unknown as number);
    }
    expect(seen).toBe(1000);
  });
});

describe("GET /v1/executions/{id}/steps/{vertexId}/items", () => {
  it("pages a MAP's items after the trace's first page; another workspace's execution is 404; a foreign cursor 400", async () => {
    const DEV = "dev"; // dev-token's workspace
    const h = harness({}, { workspace: DEV });
    const wf = await seedWorkflow(DEV, refundLines({ concurrency: 1, maxItems: 150 }));
    const id = await h.start(wf, order(150));
    await h.deliver(h.queue.take().map((m) => m.body)); // the list persisted, item 0 started
    const trace = (await (await callApp(h, "GET", `/v1/executions/${id}`)).json()) as {
      steps: Array<{ vertexId: string; map: { total: number; items: Array<{ index: number }>; nextCursor: string | null } | null }>;
    };
    const map = trace.steps.find((s) => s.vertexId === "refund")!.map!;
    expect(map.total).toBe(150);
    expect(map.items).toHaveLength(100);
    const res = await callApp(h, "GET", `/v1/executions/${id}/steps/refund/items?cursor=${encodeURIComponent(map.nextCursor!)}`);
    expect(res.status).toBe(200);
    const page = (await res.json()) as {
      total: number;
      pending: number;
      items: Array<{ index: number; state: string }>;
      nextCursor: string | null;
    };
    expect(page.items.map((i) => i.index)).toEqual(Array.from({ length: 50 }, (_, i) => 100 + i));
    expect(page).toMatchObject({ total: 150, nextCursor: null });
    expect(page.items[0]!.state).toBe("PENDING");
    const first = (await (await callApp(h, "GET", `/v1/executions/${id}/steps/refund/items`)).json()) as { items: unknown[] };
    expect(first.items).toHaveLength(100);
    expect((await callApp(h, "GET", `/v1/executions/${id}/steps/refund/items`, { token: "other-token" })).status).toBe(404);
    expect((await callApp(h, "GET", `/v1/executions/${id}/steps/refund/items?cursor=bm9wZQ`)).status).toBe(400);
  });
});

describe("MAP and the search by destination key", () => {
  it("?destinationKey= finds every execution whose item sent the key: the first and its start over", async () => {
    const DEV = "dev";
    const h = harness({}, { workspace: DEV });
    const wf = await seedWorkflow(DEV, refundLines({ concurrency: 2 }));
    const payload = order(3);
    const first = await h.start(wf, payload);
    await h.drain();
    const second = (await h.startOver(wf, payload, first)).executionId;
    await h.drain();
    const key = `refund-${payload.order.id}-S1`;
    const res = await callApp(h, "GET", `/v1/executions?destinationKey=${encodeURIComponent(key)}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { items: Array<{ executionId: string }> };
    expect(body.items.map((i) => i.executionId).sort()).toEqual([first, second].sort());
    // The same key both times: the destination charged once.
    expect(effectsPerKey(h).get(key)).toBe(1);
  });
});

describe("MAP and history", () => {
  it("an erasure takes the MAP's items with their execution (their rows, attempts and events)", async () => {
    const DEV = "dev";
    const h = harness({}, { workspace: DEV });
    const wf = await seedWorkflow(DEV, refundLines({ concurrency: 2 }));
    const id = await h.start(wf, order(3));
    await h.drain();
    const ddb = dbOf(env, DEV);
    const count = async (sql: string) => (await ddb.prepare(sql).bind(id).first<{ n: number }>())!.n;
    expect(await count("SELECT count(*) AS n FROM work_items WHERE execution_id = ?1")).toBe(3);
    const res = await callApp(h, "DELETE", `/v1/executions/${id}`, { key: unique("erase") });
    expect(res.status).toBe(200);
    expect(await count("SELECT count(*) AS n FROM work_items WHERE execution_id = ?1")).toBe(0);
    expect(await count("SELECT count(*) AS n FROM step_attempts WHERE execution_id = ?1")).toBe(0);
    expect(await count("SELECT count(*) AS n FROM step_events WHERE execution_id = ?1")).toBe(0);
  });
});
