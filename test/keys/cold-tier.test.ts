/**
 * Key memory: hot and cold (SPEC section 20, docs/history.md "Key memory: hot and cold"). Kept key
 * sends past KEY_MEMORY_HOT move from D1 to the KEY_MEMORY bucket (the pool's real local R2) and
 * into the filter; the retention guard asks the cold tier only when the hot tier misses and the
 * filter says the key may be there. Real D1, the real app, the demo's forgetful payments API
 * (120 s retention) on the harness's clock: without the cold lookup the re-send charges twice.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { coldObjectName } from "../../src/keys/cold";
import { keyDigest, maybeCold } from "../../src/keys/filter";
import { moveKeySendsOnce } from "../../src/keys/move";
import { DEFAULT_SWEEP_LIMITS, sweepHistory } from "../../src/history/sweep";
import { KEY_MAY_BE_FORGOTTEN_MARK } from "../../src/ledger";
import { app } from "../../src/app";
import { withClock } from "../../src/lib/clock";
import { createDemoTables } from "../helpers/demo-tables";
import { DAY } from "../history/helpers";
import { callApp, chargeWorkflow, demoHarness, DEST, executionStatus, seedWorkflow, stepsOf, unique, type Harness } from "../steps/helpers";

const WS = "dev";
const HOT = 35 * DAY;

beforeAll(createDemoTables);

/** A bucket that counts its reads and writes; the real local R2 underneath. */
function counting(bucket: R2Bucket) {
  const counts = { gets: 0, puts: 0 };
  const wrapped = new Proxy(bucket, {
    get(target, prop) {
      const value = Reflect.get(target, prop) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (prop === "get") counts.gets += 1;
        if (prop === "put") counts.puts += 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { bucket: wrapped, counts };
}

/** The forgetful API's harness, its steps' env carrying `bucket` as KEY_MEMORY. */
function setup(bucket: R2Bucket = env.KEY_MEMORY): Harness {
  const h = demoHarness();
  (h.rt as { env: Env }).env = { ...env, KEY_MEMORY: bucket };
  return h;
}

const workflow = (): WorkflowDefinitionInput =>
  chargeWorkflow(unique("wf"), {
    url: `${DEST}/forgetful/charges`,
    headers: { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" },
    idempotencyKey: { value: "= $idempotencyKey('charge', payload.order.id)", retention: "120s" },
    timeoutMs: 5_000,
  });

/** The history sweep at `now` with the cold tier on (the cron's deps, the test's clock). */
async function sweep(now: number, options: { hotMs?: number; bucket?: R2Bucket; horizonMs?: number | null } = {}) {
  return sweepHistory(
    {
      db: env.DB,
      now,
      elapsed: () => 0,
      queries: () => 0,
      archive: null,
      archiveQueries: 0,
      deadLetterMaxAgeMs: 30 * DAY,
      keySendHorizonMs: options.horizonMs ?? null,
      keyMemory: { bucket: options.bucket ?? env.KEY_MEMORY, hotMs: options.hotMs ?? HOT },
    },
    DEFAULT_SWEEP_LIMITS,
  );
}

async function charges(order: string): Promise<number> {
  return (await env.DB.prepare("SELECT count(*) AS n FROM charges WHERE order_id = ?1").bind(order).first<{ n: number }>())!.n;
}

async function hotRow(key: string) {
  return env.DB.prepare("SELECT first_sent_at, counted_from FROM destination_key_sends WHERE workspace = ?1 AND idempotency_key = ?2")
    .bind(WS, key)
    .first<{ first_sent_at: number; counted_from: number }>();
}

async function coldObject(key: string): Promise<string | null> {
  const object = await env.KEY_MEMORY.get(coldObjectName(WS, (await keyDigest(WS, key)).hash));
  return object === null ? null : object.text();
}

/** One charge of `order`, run and then swept with its key moved cold 400 days later. */
async function chargedThenCold(h: Harness, wf: Awaited<ReturnType<typeof seedWorkflow>>, order: string) {
  const first = await h.start(wf, { order: { id: order, total: 9 } });
  await h.drain();
  expect(await executionStatus(first)).toBe("COMPLETED");
  const key = (await stepsOf(first)).charge!.idempotency_key!;
  const sentAt = (await hotRow(key))!.first_sent_at;
  h.clock.advance(400 * DAY);
  const report = await sweep(h.clock.now());
  expect(await executionStatus(first)).toBeUndefined(); // swept
  expect(report.keysMoved).toBeGreaterThanOrEqual(1);
  return { first, key, sentAt };
}

describe("key memory: hot and cold", () => {
  it("a key first sent 400 days ago, its send moved cold, is refused by the guard for a new execution: one charge", async () => {
    const h = setup();
    const order = unique("C");
    const wf = await seedWorkflow(WS, workflow());
    const { key, sentAt } = await chargedThenCold(h, wf, order);
    expect(await hotRow(key)).toBeNull(); // not in D1 any more
    const object = await coldObject(key);
    expect(object).not.toBeNull();
    expect(object).not.toContain(order); // a hash of the key, never the key or its business value
    expect(JSON.parse(object!)).toMatchObject({ sends: [{ destination: DEST, firstSentAt: sentAt, countedFrom: sentAt }] });

    // The same order again: the same key, which the destination forgot long ago.
    const second = await h.start(wf, { order: { id: order, total: 9 } });
    await h.drain();
    const step = (await stepsOf(second)).charge!;
    expect(step.state).toBe("FAILED");
    expect(step.error).toContain(KEY_MAY_BE_FORGOTTEN_MARK);
    expect(await charges(order)).toBe(1);
    // Restored hot: the trace, a retry and an acknowledgement see the first send without R2.
    expect(await hotRow(key)).toEqual({ first_sent_at: sentAt, counted_from: sentAt });
  });

  it("an operator's acknowledgement reaches a cold record: the key is sent once more and its retention counts from the retry", async () => {
    const h = setup();
    const order = unique("A");
    const wf = await seedWorkflow(WS, workflow());
    const { key, sentAt } = await chargedThenCold(h, wf, order);
    const second = await h.start(wf, { order: { id: order, total: 9 } });
    await h.drain();
    expect((await stepsOf(second)).charge!.state).toBe("FAILED");
    // The operator's route on the harness's clock (400 days ahead of the wall clock).
    const ctx = createExecutionContext();
    const retry = await app.fetch(
      new Request(`http://idemflow.test/v1/executions/${second}/steps/charge/retry`, {
        method: "POST",
        headers: { authorization: "Bearer dev-token", "idempotency-key": unique("op"), "content-type": "application/json" },
        body: JSON.stringify({ acknowledgeForgottenKey: true }),
      }),
      withClock({ ...env, QUEUE: h.queue as unknown as Queue }, h.clock.now),
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(retry.status).toBe(202);
    const ackAt = h.clock.now();
    await h.drain();
    expect((await stepsOf(second)).charge!.error).toBeNull();
    expect((await stepsOf(second)).charge!.state).toBe("COMPLETED");
    expect(await charges(order)).toBe(2); // the acknowledged re-send
    expect(await hotRow(key)).toEqual({ first_sent_at: sentAt, counted_from: ackAt });
    // Swept and moved again: the cold record carries the acknowledgement.
    h.clock.advance(400 * DAY);
    await sweep(h.clock.now());
    expect(await hotRow(key)).toBeNull();
    expect(JSON.parse((await coldObject(key))!)).toMatchObject({ sends: [{ firstSentAt: sentAt, countedFrom: ackAt }] });
  });

  it("a new key costs no cold read when the filter says absent (counted), and the cold tier unreachable refuses to send", async () => {
    const seeded = setup();
    const wf = await seedWorkflow(WS, workflow());
    await chargedThenCold(seeded, wf, unique("F")); // the filter holds a key
    const { bucket, counts } = counting(env.KEY_MEMORY);
    const h = setup(bucket);
    h.clock.t = seeded.clock.now();
    const orders = Array.from({ length: 30 }, () => unique("N"));
    for (const order of orders) await h.start(wf, { order: { id: order, total: 1 } });
    await h.drain();
    for (const order of orders) expect(await charges(order)).toBe(1);
    expect(counts.gets).toBe(0);

    // The filter says "maybe" and R2 does not answer: not sent, retried later — never blindly.
    const order = unique("D");
    const down = setup(
      new Proxy(env.KEY_MEMORY, {
        get: (target, prop) =>
          prop === "get" ? () => Promise.reject(new Error("R2 unavailable")) : (Reflect.get(target, prop) as unknown),
      }),
    );
    down.clock.t = seeded.clock.now();
    const { key } = await chargedThenCold(down, wf, order);
    expect(key).toBeTruthy();
    const again = await down.start(wf, { order: { id: order, total: 9 } });
    await down.drain();
    const step = (await stepsOf(again)).charge!;
    expect(step.state).not.toBe("COMPLETED");
    expect(step.error ?? "").toContain("could not check whether key");
    expect(await charges(order)).toBe(1);
  });

  it("the sweep moves only the kept sends past KEY_MEMORY_HOT, and none a step still holds", async () => {
    const h = setup();
    const wf = await seedWorkflow(WS, workflow());
    const old = await h.start(wf, { order: { id: unique("O"), total: 2 } });
    await h.drain();
    const oldKey = (await stepsOf(old)).charge!.idempotency_key!;
    h.clock.advance(30 * DAY);
    const recent = await h.start(wf, { order: { id: unique("R"), total: 2 } });
    await h.drain();
    const recentKey = (await stepsOf(recent)).charge!.idempotency_key!;
    h.clock.advance(10 * DAY); // old: 40 days, recent: 10 days; both executions past their 7 days
    const report = await sweep(h.clock.now());
    expect(report.removed).toBeGreaterThanOrEqual(2);
    expect(await hotRow(oldKey)).toBeNull();
    expect(await coldObject(oldKey)).not.toBeNull();
    expect(await hotRow(recentKey)).not.toBeNull();
    expect(await coldObject(recentKey)).toBeNull();

    // A key whose execution is still kept (its workflow keeps it 30 days) stays hot however old its send.
    const kept = await seedWorkflow(WS, { ...workflow(), history: { completed: "30d" } } as WorkflowDefinitionInput);
    const held = await h.start(kept, { order: { id: unique("K"), total: 2 } });
    await h.drain();
    const heldKey = (await stepsOf(held)).charge!.idempotency_key!;
    await sweep(h.clock.now() + 20 * DAY, { hotMs: 1 * DAY });
    expect(await executionStatus(held)).toBeDefined();
    expect(await hotRow(heldKey)).not.toBeNull();
  });

  it("sends still held by kept executions never stall the move of those behind them (the cursor)", async () => {
    const h = setup();
    const kept = await seedWorkflow(WS, { ...workflow(), history: { completed: "30d" } } as WorkflowDefinitionInput);
    const wf = await seedWorkflow(WS, workflow());
    const heldKeys: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await h.start(kept, { order: { id: unique("H"), total: 1 } });
      await h.drain();
      heldKeys.push((await stepsOf(id)).charge!.idempotency_key!);
      h.clock.advance(1_000);
    }
    const free = await h.start(wf, { order: { id: unique("F"), total: 1 } });
    await h.drain();
    const freeKey = (await stepsOf(free)).charge!.idempotency_key!;
    h.clock.advance(8 * DAY);
    await sweepHistory(
      {
        db: env.DB,
        now: h.clock.now(),
        elapsed: () => 0,
        queries: () => 0,
        archive: null,
        archiveQueries: 0,
        deadLetterMaxAgeMs: 30 * DAY,
      },
      DEFAULT_SWEEP_LIMITS,
    ); // the free key's execution swept; the kept ones not
    const deps = { db: env.DB, bucket: env.KEY_MEMORY, now: h.clock.now(), hotMs: DAY, horizonMs: null, scan: 2 };
    await env.DB.prepare("DELETE FROM key_move_cursor").run();
    // Pass 1 looks at two held sends (older) and moves nothing; pass 2 goes on after them.
    const first = await moveKeySendsOnce(deps);
    expect(first).toMatchObject({ moved: 0, full: true });
    let moved = 0;
    for (let pass = 0; pass < 30 && (await hotRow(freeKey)) !== null; pass++) moved += (await moveKeySendsOnce(deps)).moved;
    expect(moved).toBeGreaterThanOrEqual(1);
    expect(await hotRow(freeKey)).toBeNull();
    for (const key of heldKeys) expect(await hotRow(key)).not.toBeNull();
  });

  it("erasure of a cold key's execution keeps the key's existence: the guard still refuses", async () => {
    const h = setup();
    const order = unique("E");
    const wf = await seedWorkflow(WS, workflow());
    const first = await h.start(wf, { order: { id: order, total: 5 } });
    await h.drain();
    const key = (await stepsOf(first)).charge!.idempotency_key!;
    h.clock.advance(8 * DAY);
    await sweep(h.clock.now(), { hotMs: 1 * DAY }); // swept (7 days), its key moved cold (1 day)
    expect(await hotRow(key)).toBeNull();
    const erased = await callApp(h, "DELETE", `/v1/executions/${first}`, { key: unique("erase") });
    expect(erased.status).toBe(200);
    expect(await coldObject(key)).not.toBeNull();
    const again = await h.start(wf, { order: { id: order, total: 5 } });
    await h.drain();
    expect((await stepsOf(again)).charge!.error).toContain(KEY_MAY_BE_FORGOTTEN_MARK);
    expect(await charges(order)).toBe(1);
  });

  it("an erasure after the key moved cold leaves a record of the key's existence only: hash, destination, times", async () => {
    const h = setup();
    const order = unique("Z");
    const wf = await seedWorkflow(WS, workflow());
    const { first, key } = await chargedThenCold(h, wf, order);
    const erased = await callApp(h, "DELETE", `/v1/executions/${first}`, { key: unique("erase") });
    expect(erased.status).toBe(200);
    const text = (await coldObject(key))!;
    expect(text).not.toContain(first);
    expect(text).not.toContain(order);
    expect(JSON.parse(text)).toEqual({
      v: 1,
      keyHash: (await keyDigest(WS, key)).hash,
      sends: [{ destination: DEST, firstSentAt: expect.any(Number), countedFrom: expect.any(Number) }],
    });
    // The key's existence is what the guard needs: the same order is still refused.
    const again = await h.start(wf, { order: { id: order, total: 9 } });
    await h.drain();
    expect((await stepsOf(again)).charge!.error).toContain(KEY_MAY_BE_FORGOTTEN_MARK);
    expect(await charges(order)).toBe(1);
  });

  it("an execution erased before its key moves cold leaves a record that names no execution: the key's existence only", async () => {
    const h = setup();
    const order = unique("B");
    const wf = await seedWorkflow(WS, workflow());
    const first = await h.start(wf, { order: { id: order, total: 5 } });
    await h.drain();
    const key = (await stepsOf(first)).charge!.idempotency_key!;
    h.clock.advance(2 * DAY);
    // On the harness's clock: the tombstone (what tells the move the execution was erased) dates from now.
    const ctx = createExecutionContext();
    const erased = await app.fetch(
      new Request(`http://idemflow.test/v1/executions/${first}`, {
        method: "DELETE",
        headers: { authorization: "Bearer dev-token", "idempotency-key": unique("erase") },
      }),
      withClock({ ...env, QUEUE: h.queue as unknown as Queue }, h.clock.now),
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(erased.status).toBe(200);
    expect(await hotRow(key)).not.toBeNull(); // kept: the guard needs it
    await sweep(h.clock.now(), { hotMs: 1 * DAY });
    expect(await hotRow(key)).toBeNull();
    const record = JSON.parse((await coldObject(key))!) as { sends: Array<Record<string, unknown>> };
    expect(record.sends).toEqual([{ destination: DEST, firstSentAt: expect.any(Number), countedFrom: expect.any(Number) }]);
    expect(JSON.stringify(record)).not.toContain(first);
    const again = await h.start(wf, { order: { id: order, total: 5 } });
    await h.drain();
    expect((await stepsOf(again)).charge!.error).toContain(KEY_MAY_BE_FORGOTTEN_MARK);
    expect(await charges(order)).toBe(1);
  });

  it("a MAP item's guarded key moved cold is refused like a step's: no item charges twice", async () => {
    const h = setup();
    const order = unique("M");
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
            concurrency: 2,
            maxItems: 10,
            onItemFailure: "continue",
            step: {
              type: "GATEWAY",
              config: {
                method: "POST",
                url: `${DEST}/forgetful/charges`,
                headers: { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" },
                idempotencyKey: { value: "= $idempotencyKey('line', payload.order.id, line.sku)", retention: "120s" },
                body: "= { 'order': payload.order.id & '-' & line.sku, 'amount': line.amount }",
                timeoutMs: 5_000,
              },
            },
          },
        },
      ],
      edges: [{ from: "received", to: "refund" }],
    } as WorkflowDefinitionInput);
    const lines = [
      { sku: "a", amount: 1 },
      { sku: "b", amount: 2 },
    ];
    const first = await h.start(wf, { order: { id: order, lines } });
    await h.drain();
    expect(await executionStatus(first)).toBe("COMPLETED");
    h.clock.advance(400 * DAY);
    const report = await sweep(h.clock.now());
    expect(report.keysMoved).toBeGreaterThanOrEqual(2);
    const again = await h.start(wf, { order: { id: order, lines } });
    await h.drain();
    const { results } = await env.DB.prepare("SELECT state, error FROM work_items WHERE execution_id = ?1")
      .bind(again)
      .all<{ state: string; error: string | null }>();
    expect(results.map((r) => r.state)).toEqual(["FAILED", "FAILED"]);
    for (const r of results) expect(r.error).toContain(KEY_MAY_BE_FORGOTTEN_MARK);
    expect(await charges(`${order}-a`)).toBe(1);
    expect(await charges(`${order}-b`)).toBe(1);
  });

  it("?destinationKey= finds a key whose send moved cold (its existence: no execution named)", async () => {
    const h = setup();
    const order = unique("S");
    const wf = await seedWorkflow(WS, workflow());
    const { key, sentAt } = await chargedThenCold(h, wf, order);
    const found = await callApp(h, "GET", `/v1/executions?destinationKey=${encodeURIComponent(key)}`);
    expect(found.status).toBe(200);
    const body = await found.json<{ keys: Array<Record<string, unknown>> }>();
    expect(body.keys).toEqual([
      {
        key,
        destination: DEST,
        firstSentAt: new Date(sentAt).toISOString(),
        countedFrom: new Date(sentAt).toISOString(),
        executionId: "",
        vertexId: "",
      },
    ]);
    expect((await maybeCold(env.DB, [await keyDigest(WS, key)])).size).toBe(1);
  });
});
