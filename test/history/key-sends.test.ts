/**
 * Destination key sends outlive their executions (SPEC section 12): the retention guard reads the
 * first send of a key per workspace and destination, so when the execution that first sent a
 * guarded key is swept, the row stays — and a later execution of the same business data is still
 * refused, instead of re-sending a key the destination has forgotten. The destination is the
 * demo's forgetful payments API (120 s retention, on the harness's clock), behind the real
 * Idempotency-Key middleware: without the kept row, the test sees a second charge.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { KEY_MAY_BE_FORGOTTEN_MARK, searchExecutions } from "../../src/ledger";
import { keySendHorizonMs } from "../../src/history/retention";
import { createDemoTables } from "../helpers/demo-tables";
import { DAY, sweepAt } from "./helpers";
import { callApp, chargeWorkflow, demoHarness, DEST, executionStatus, seedWorkflow, stepsOf, unique, type Harness } from "../steps/helpers";

const WS = "dev";

beforeAll(createDemoTables);

const setup = (): Harness => demoHarness();

/** entry → charge at the forgetful API; `retention` declared (guarded) or not (the header form: unguarded). */
const workflow = (guarded: boolean): WorkflowDefinitionInput =>
  chargeWorkflow(unique("wf"), {
    url: `${DEST}/forgetful/charges`,
    headers: guarded
      ? { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" }
      : { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}", "Idempotency-Key": "= $idempotencyKey('charge', payload.order.id)" },
    ...(guarded ? { idempotencyKey: { value: "= $idempotencyKey('charge', payload.order.id)", retention: "120s" } } : {}),
    timeoutMs: 5_000,
  });

async function charges(order: string): Promise<number> {
  return (await env.DB.prepare("SELECT count(*) AS n FROM charges WHERE order_id = ?1").bind(order).first<{ n: number }>())!.n;
}

async function keySend(key: string) {
  return env.DB.prepare("SELECT execution_id, first_sent_at, guarded, unguarded FROM destination_key_sends WHERE idempotency_key = ?1")
    .bind(key)
    .first<{ execution_id: string; first_sent_at: number; guarded: number; unguarded: number | null }>();
}

describe("key sends after the sweep", () => {
  it("a guarded key's send is kept when its execution is swept, and the guard still refuses a later execution: one charge", async () => {
    const h = setup();
    const order = unique("G");
    const wf = await seedWorkflow(WS, workflow(true));
    const first = await h.start(wf, { order: { id: order, total: 9 } });
    await h.drain();
    expect(await executionStatus(first)).toBe("COMPLETED");
    const key = (await stepsOf(first)).charge!.idempotency_key!;
    const sent = await keySend(key);
    expect(sent).toMatchObject({ execution_id: first, guarded: 1 });

    h.clock.advance(8 * DAY);
    await sweepAt(h.clock.now());
    expect(await executionStatus(first)).toBeUndefined(); // swept
    expect(await keySend(key)).toEqual(sent); // kept, as it was

    // The same order again, a week later: the same key, which the destination has forgotten.
    const second = await h.start(wf, { order: { id: order, total: 9 } });
    await h.drain();
    const step = (await stepsOf(second)).charge!;
    expect(step.state).toBe("FAILED");
    expect(step.error).toContain(KEY_MAY_BE_FORGOTTEN_MARK);
    expect(await charges(order)).toBe(1);
  });

  it("a guarded key's send stays guarded when the same key is later sent unguarded: still kept after both are swept", async () => {
    const h = setup();
    const order = unique("D");
    const guarded = await h.start(await seedWorkflow(WS, workflow(true)), { order: { id: order, total: 3 } });
    await h.drain();
    const key = (await stepsOf(guarded)).charge!.idempotency_key!;
    // The same business key from a workflow that declares no retention (the header form).
    const unguarded = await h.start(await seedWorkflow(WS, workflow(false)), { order: { id: order, total: 3 } });
    await h.drain();
    expect((await stepsOf(unguarded)).charge!.idempotency_key).toBe(key);
    expect(await keySend(key)).toMatchObject({ execution_id: guarded, guarded: 1 });
    h.clock.advance(8 * DAY);
    await sweepAt(h.clock.now());
    expect(await executionStatus(guarded)).toBeUndefined();
    expect(await executionStatus(unguarded)).toBeUndefined();
    expect(await keySend(key)).toMatchObject({ execution_id: guarded, guarded: 1 });
  });

  it("unguarded → guarded: an unguarded key's send is kept past the sweep; a later version with a retention refuses it", async () => {
    const h = setup();
    const order = unique("U");
    const id = unique("wf");
    const version = (guarded: boolean): WorkflowDefinitionInput => ({ ...workflow(guarded), id });
    const v1 = await seedWorkflow(WS, version(false));
    const first = await h.start(v1, { order: { id: order, total: 4 } });
    await h.drain();
    expect(await executionStatus(first)).toBe("COMPLETED");
    const key = (await stepsOf(first)).charge!.idempotency_key!;
    const sent = await keySend(key);
    // Born kept (migrations/0043), marked unguarded: not aged while its execution lives.
    expect(sent).toMatchObject({ execution_id: first, guarded: 1, unguarded: 1 });
    h.clock.advance(8 * DAY);
    await sweepAt(h.clock.now());
    expect(await executionStatus(first)).toBeUndefined(); // swept
    // Kept as it was born, and from now on aged like a guarded send (HISTORY_KEY_SENDS): its execution is gone.
    expect(await keySend(key)).toEqual(sent);

    // The workflow saved again, now declaring the destination's retention; the same order a week later.
    const v2 = await seedWorkflow(WS, version(true));
    expect(v2.version).not.toBe(v1.version);
    const second = await h.start(v2, { order: { id: order, total: 4 } });
    await h.drain();
    const step = (await stepsOf(second)).charge!;
    expect(step.idempotency_key).toBe(key);
    expect(step.state).toBe("FAILED");
    expect(step.error).toContain(KEY_MAY_BE_FORGOTTEN_MARK);
    expect(await charges(order)).toBe(1);
  });

  it("an erasure keeps an unguarded key's send too (born kept): the guard of a later version still finds it", async () => {
    const h = setup();
    const id = await h.start(await seedWorkflow(WS, workflow(false)), { order: { id: unique("E"), total: 2 } });
    await h.drain();
    const key = (await stepsOf(id)).charge!.idempotency_key!;
    const sent = await keySend(key);
    expect(sent).toMatchObject({ execution_id: id, guarded: 1, unguarded: 1 });
    expect((await callApp(h, "DELETE", `/v1/executions/${id}`, { key: unique("erase") })).status).toBe(200);
    expect(await executionStatus(id)).toBeUndefined();
    expect(await keySend(key)).toEqual(sent);
  });

  it("HISTORY_KEY_SENDS: forever by default; a horizon drops guarded sends counted from before it, and only those", async () => {
    const h = setup();
    const wf = await seedWorkflow(WS, workflow(true));
    const old = await h.start(wf, { order: { id: unique("H"), total: 4 } });
    await h.drain();
    const oldKey = (await stepsOf(old)).charge!.idempotency_key!;
    h.clock.advance(40 * DAY);
    const recent = await h.start(wf, { order: { id: unique("H"), total: 4 } });
    await h.drain();
    const recentKey = (await stepsOf(recent)).charge!.idempotency_key!;
    await sweepAt(h.clock.now());
    expect(await keySend(oldKey)).not.toBeNull(); // forever
    expect(keySendHorizonMs({})).toBeNull();
    expect(keySendHorizonMs({ HISTORY_KEY_SENDS: "forever" })).toBeNull();
    expect(keySendHorizonMs({ HISTORY_KEY_SENDS: "7d" })).toBeNull(); // under 30 days: the safe reading
    const horizon = keySendHorizonMs({ HISTORY_KEY_SENDS: "30d" });
    expect(horizon).toBe(30 * DAY);
    const { report } = await sweepAt(h.clock.now(), { keySendHorizonMs: horizon });
    expect(report.keySendsExpired).toBeGreaterThanOrEqual(1);
    expect(await keySend(oldKey)).toBeNull();
    expect(await keySend(recentKey)).not.toBeNull();
  });

  it("HISTORY_KEY_SENDS: a send born unguarded is not forgotten while its execution is kept; it goes once its execution has", async () => {
    const h = setup();
    // Completed executions kept 90 days; failed and cancelled ones the default 30: the send's hot hold is 30 days.
    const wf = await seedWorkflow(WS, { ...workflow(false), history: { completed: "90d" } } as WorkflowDefinitionInput);
    const id = await h.start(wf, { order: { id: unique("G"), total: 4 } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    const key = (await stepsOf(id)).charge!.idempotency_key!;
    const sent = await keySend(key);
    expect(sent).toMatchObject({ execution_id: id, guarded: 1, unguarded: 1 });
    const horizon = 30 * DAY;
    // Day 70: counted from before the horizon, hold included (30 + 30 days) — but its execution is still kept.
    h.clock.advance(70 * DAY);
    await sweepAt(h.clock.now(), { keySendHorizonMs: horizon });
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(await keySend(key)).toEqual(sent);
    // Day 91: the execution goes, and with it what held the send: forgotten on purpose, as before migrations/0043.
    h.clock.advance(21 * DAY);
    await sweepAt(h.clock.now(), { keySendHorizonMs: horizon });
    expect(await executionStatus(id)).toBeUndefined();
    expect(await keySend(key)).toBeNull();
  });

  it("a guarded send forgotten while its execution is kept (HISTORY_KEY_SENDS): the key's search still finds the execution", async () => {
    const h = setup();
    const wf = await seedWorkflow(WS, { ...workflow(true), history: { completed: "90d" } } as WorkflowDefinitionInput);
    const id = await h.start(wf, { order: { id: unique("F"), total: 4 } });
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    const key = step.idempotency_key!;
    const firstSend = () =>
      env.DB.prepare("SELECT key_first_send AS f FROM steps WHERE execution_id = ?1 AND vertex_id = 'charge'")
        .bind(id)
        .first<number | null>("f");
    const found = async () => (await searchExecutions(env.DB, WS, { by: "key", keys: [key] }, { limit: 10 })).hits;
    // The send row names the step (migrations/0043): no steps_by_key entry; found by the send row.
    expect(await firstSend()).toBe(1);
    expect(await found()).toEqual([{ live: expect.objectContaining({ id }) }]);
    h.clock.advance(31 * DAY);
    await sweepAt(h.clock.now(), { keySendHorizonMs: 30 * DAY });
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(await keySend(key)).toBeNull(); // a guarded send goes at the horizon, kept execution or not (as before)
    // Its step got its steps_by_key entry back as the send row went (`destination_key_sends_unnamed`).
    expect(await found()).toEqual([{ live: expect.objectContaining({ id }) }]);
    expect(await firstSend()).toBeNull();
  });
});
