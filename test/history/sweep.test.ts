/**
 * The history sweep (SPEC section 12): finished executions past their retention go with every row
 * that belongs to them — chain by chain, in bounded passes — and nothing else goes: not a RUNNING
 * execution, not one within its retention or its dedupe window, not a member of a chain whose last
 * member is not due, not a guarded key send. Real D1, the real start batch and consumer; the clock
 * is moved, never slept.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { holdChains, MAX_CHAIN_MEMBERS, removeExecutions, retryFailedStep, selectDueChains } from "../../src/ledger";
import { runHistorySweep } from "../../src/history/cron";
import { DAY, finishedExecutions, GONE, rowsOf, sweepAt, tombstoneOf } from "./helpers";
import { callApp, chargeWorkflow, executionStatus, failedCharge, harness, seedWorkflow, unique, type Harness } from "../steps/helpers";

const WS = "dev"; // dev-token's workspace (the route tests)

async function finishedAt(id: string): Promise<number> {
  return (await env.DB.prepare("SELECT finished_at AS f FROM executions WHERE id = ?1").bind(id).first<{ f: number }>())!.f;
}

async function foreignKeyProblems(): Promise<unknown[]> {
  return (await env.DB.prepare("PRAGMA foreign_key_check").all()).results;
}

/** A completed charge execution (its key in the header form: unguarded). */
async function completed(h: Harness, wfId = unique("wf")) {
  const wf = await seedWorkflow(WS, chargeWorkflow(wfId));
  const id = await h.start(wf, { order: { id: unique("O"), total: 5 } });
  await h.drain();
  expect(await executionStatus(id)).toBe("COMPLETED");
  return { wf, id };
}

describe("the history sweep", () => {
  it("removes exactly the finished executions past retention, with all their rows; nothing running, nothing within retention", async () => {
    const h = harness();
    const old = await completed(h);
    const retried = await failedCharge(h, WS); // FAILED: 30 days by default, and attempts and events of its own
    h.clock.advance(DAY);
    const young = await completed(h);
    const running = await h.start(old.wf, { order: { id: unique("O"), total: 1 } }); // its charge never delivered
    h.queue.take();
    const before = { old: await rowsOf(old.id), young: await rowsOf(young.id), running: await rowsOf(running) };
    expect(before.old.steps).toBe(2); // charge and done: the entry has no row (migrations/0045)
    expect(before.old.attempts).toBeGreaterThan(0);
    expect(before.old.keySends).toBe(1);

    // Past old's 7 days (the default), within young's.
    const now = (await finishedAt(old.id)) + 7 * DAY;
    const { report } = await sweepAt(now);
    expect(report.removed).toBeGreaterThanOrEqual(1);
    expect(await rowsOf(old.id)).toEqual(GONE);
    expect(await rowsOf(young.id)).toEqual(before.young);
    expect(await rowsOf(running)).toEqual(before.running);
    expect((await rowsOf(retried.id)).executions).toBe(1);
    expect(await tombstoneOf(old.id)).toMatchObject({ workspace: WS, status: "COMPLETED", reason: "retention", archived: 0 });
    expect(await foreignKeyProblems()).toEqual([]);

    // One millisecond before young's time it stays; at it, it goes.
    const youngDue = (await finishedAt(young.id)) + 7 * DAY;
    await sweepAt(youngDue - 1);
    expect((await rowsOf(young.id)).executions).toBe(1);
    await sweepAt(youngDue);
    expect(await rowsOf(young.id)).toEqual(GONE);
    // The failed one keeps its 30 days.
    const failedDue = (await finishedAt(retried.id)) + 30 * DAY;
    await sweepAt(failedDue - 1);
    expect((await rowsOf(retried.id)).executions).toBe(1);
    await sweepAt(failedDue);
    expect(await rowsOf(retried.id)).toEqual(GONE);
    expect(await rowsOf(running)).toEqual(before.running);
  });

  it("a workflow's `history` sets its retention, and the deployment's vars reach the start batch", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, { ...chargeWorkflow(unique("wf")), history: { completed: "2d" } } as never);
    const id = await h.start(wf, { order: { id: unique("O"), total: 5 } });
    await h.drain();
    const row = await env.DB.prepare(
      "SELECT retain_completed_ms AS c, retain_failed_ms AS f, purge_at - finished_at AS d FROM executions WHERE id = ?1",
    )
      .bind(id)
      .first<{ c: number; f: number; d: number }>();
    // 2 days asked, but never shorter than the entry's dedupe window (24 h by default): 2 days holds.
    expect(row).toEqual({ c: 2 * DAY, f: 30 * DAY, d: 2 * DAY });
  });

  it("passes are bounded: a backlog goes in passes of the stated size, within the query budget, and continues next time", async () => {
    const { ids, dueAt: now } = await finishedExecutions(WS, 12);
    // Everything else due in this file goes first; what matters: each pass at most 5, 2 passes.
    const first = await sweepAt(now, { limits: { executionsPerPass: 5, maxPasses: 2 } });
    expect(first.report.passes).toBe(2);
    expect(first.report.removed).toBeLessThanOrEqual(10);
    expect(first.report.drained).toBe(false);
    // Statements: per pass one select and one removal batch of eleven (no chain held), and the side sweeps.
    expect(first.counted.statements()).toBeLessThanOrEqual(2 * 13 + 2);
    for (const call of first.counted.calls.filter((c) => c.kind === "batch")) expect(call.sql.length).toBe(11);
    // A budget that does not fit one more pass stops it.
    const starved = await sweepAt(now, { limits: { executionsPerPass: 5, queryBudget: 8 } });
    expect(starved.report.passes).toBe(0);
    let rounds = 0;
    while ((await sweepAt(now, { limits: { executionsPerPass: 5 } })).report.drained === false && rounds++ < 20);
    for (const id of ids) expect((await rowsOf(id)).executions).toBe(0);
  });

  it("a start-over chain goes as one unit when its last member is due; its due members are held until then; FKs clean", async () => {
    const h = harness();
    const { wf, id: failed } = await failedCharge(h, WS); // FAILED: kept 30 days
    h.clock.advance(DAY);
    const again = await h.startOver(wf, { order: { id: unique("O"), total: 12 } }, failed);
    await h.drain();
    expect(await executionStatus(again.executionId)).toBe("COMPLETED"); // kept 7 days

    // The completed start over is due; the failed execution it links to is not: both stay.
    const completedDue = (await finishedAt(again.executionId)) + 7 * DAY;
    const { report } = await sweepAt(completedDue);
    expect(report.held).toBeGreaterThanOrEqual(1);
    expect((await rowsOf(again.executionId)).executions).toBe(1);
    expect((await rowsOf(failed)).executions).toBe(1);
    const held = await env.DB.prepare("SELECT purge_at FROM executions WHERE id = ?1")
      .bind(again.executionId)
      .first<{ purge_at: number }>();
    const failedDue = (await finishedAt(failed)) + 30 * DAY;
    expect(held!.purge_at).toBe(failedDue); // held until its chain's last member is due

    // Nothing the held execution sits on is looked at again before then.
    expect((await selectDueChains(env.DB, completedDue + 1, 100)).chains.flat().map((e) => e.id)).not.toContain(again.executionId);

    await sweepAt(failedDue);
    expect(await rowsOf(failed)).toEqual(GONE);
    expect(await rowsOf(again.executionId)).toEqual(GONE);
    expect(await foreignKeyProblems()).toEqual([]);
  });

  it("a reuse-after-failure chain goes as one unit, and foreign keys stay clean", async () => {
    const h = harness();
    const def = chargeWorkflow(unique("wf"));
    def.vertices[0] = { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", reusePolicy: "after-failure" } };
    const wf = await seedWorkflow(WS, def);
    const payload = { order: { id: unique("R"), total: 3 } };
    h.dest.fault("/payments/charges", 500, 3);
    const first = (await (await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload })).json()) as {
      executionId: string;
    };
    await h.drain();
    expect(await executionStatus(first.executionId)).toBe("FAILED");
    const second = (await (await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload })).json()) as {
      executionId: string;
    };
    await h.drain();
    expect(second.executionId).not.toBe(first.executionId);
    expect(await executionStatus(second.executionId)).toBe("COMPLETED");
    const links = await env.DB.prepare("SELECT superseded_by AS s FROM executions WHERE id = ?1")
      .bind(first.executionId)
      .first<{ s: string }>();
    expect(links!.s).toBe(second.executionId);

    // Far past both (and past the identity's window): the chain goes whole.
    const now = Math.max(await finishedAt(first.executionId), await finishedAt(second.executionId)) + 31 * DAY;
    await sweepAt(now);
    expect(await rowsOf(first.executionId)).toEqual(GONE);
    expect(await rowsOf(second.executionId)).toEqual(GONE);
    expect(await foreignKeyProblems()).toEqual([]);
  });

  it("never removes an execution whose identity is still inside its dedupe window: a duplicate must still find it", async () => {
    const h = harness();
    h.clock.t = Date.now(); // the trigger route's clock is the wall clock
    const def = chargeWorkflow(unique("wf"));
    def.vertices[0] = { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", dedupeWindow: "90d" } };
    const wf = await seedWorkflow(WS, def);
    const payload = { order: { id: unique("W"), total: 3 } };
    const { executionId } = (await (await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload })).json()) as {
      executionId: string;
    };
    await h.drain();
    // The start batch never writes a retention shorter than the window…
    const row = await env.DB.prepare("SELECT retain_completed_ms AS c FROM executions WHERE id = ?1")
      .bind(executionId)
      .first<{ c: number }>();
    expect(row!.c).toBe(90 * DAY);
    // …and a row from before migration 0017 (its defaults: 7 days) is held by the live identity.
    await env.DB.prepare("UPDATE executions SET retain_completed_ms = ?2 WHERE id = ?1")
      .bind(executionId, 7 * DAY)
      .run();
    const at = (await finishedAt(executionId)) + 8 * DAY;
    const { report } = await sweepAt(at);
    expect(report.held).toBeGreaterThanOrEqual(1);
    expect((await rowsOf(executionId)).executions).toBe(1);
    const dup = (await (await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload })).json()) as {
      executionId: string;
      deduplicated: boolean;
    };
    expect(dup).toMatchObject({ executionId, deduplicated: true });
  });

  it("an operator retry between selection and removal makes the removal a no-op: nothing of a reopened execution goes", async () => {
    const h = harness();
    const { id } = await failedCharge(h, WS);
    const now = (await finishedAt(id)) + 30 * DAY;
    const selection = await selectDueChains(env.DB, now, 100);
    const chain = selection.chains.find((c) => c.some((e) => e.id === id))!;
    expect(chain).toBeDefined();
    const before = await rowsOf(id);
    // The operator reopens it (RUNNING: no purge time), then the sweep's removal arrives.
    await retryFailedStep(env.DB, WS, { executionId: id, vertexId: "charge" }, now, {});
    expect(await executionStatus(id)).toBe("RUNNING");
    const removal = await removeExecutions(
      env.DB,
      chain.map((e) => e.id),
      now,
      "retention",
    );
    expect(removal.executions).toBe(0);
    const after = await rowsOf(id);
    expect(after.executions).toBe(1);
    expect(after.steps).toBe(before.steps);
    expect(after.attempts).toBe(before.attempts);
    expect(await tombstoneOf(id)).toBeNull();
    // holdChains never moves a running execution.
    expect(await holdChains(env.DB, [{ ids: [id], until: now + DAY }])).toBe(0);
  });

  it("a start over linked to a selected execution before its removal makes the removal a no-op: nothing left dangling", async () => {
    const h = harness();
    const { wf, id } = await failedCharge(h, WS);
    const now = (await finishedAt(id)) + 30 * DAY;
    const chain = (await selectDueChains(env.DB, now, 100)).chains.find((c) => c.some((e) => e.id === id))!;
    expect(chain.map((e) => e.id)).toEqual([id]);
    const before = await rowsOf(id);
    // The operator starts it over between the sweep's selection and its removal batch.
    const again = await h.startOver(wf, { order: { id: unique("O"), total: 12 } }, id);
    expect(again).toMatchObject({ deduplicated: false });
    const removal = await removeExecutions(env.DB, [id], now, "retention");
    expect(removal.executions).toBe(0);
    expect(await rowsOf(id)).toEqual(before);
    expect(await tombstoneOf(id)).toBeNull();
    expect(await foreignKeyProblems()).toEqual([]);
  });

  it("a trigger after its execution was swept starts a new execution under another id; the tombstone stays the old one's", async () => {
    const h = harness();
    h.clock.t = Date.now(); // the trigger route's clock is the wall clock
    const def = chargeWorkflow(unique("wf"));
    def.vertices[0] = { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id" } };
    const wf = await seedWorkflow(WS, def);
    const payload = { order: { id: unique("T"), total: 3 } };
    const trigger = async () =>
      (await (await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload })).json()) as {
        executionId: string;
        deduplicated: boolean;
      };
    const first = await trigger();
    await h.drain();
    // The identity's window (24 h, on the wall clock of the route) and the 7 days have passed.
    const now = Math.max(Date.now(), await finishedAt(first.executionId)) + 8 * DAY;
    await sweepAt(now);
    expect((await rowsOf(first.executionId)).executions).toBe(0);
    expect(await tombstoneOf(first.executionId)).not.toBeNull();
    // Expire the identity row as the identity sweep would find it, then trigger again.
    await env.DB.prepare("DELETE FROM execution_identities WHERE execution_id = ?1").bind(first.executionId).run();
    const second = await trigger();
    expect(second.deduplicated).toBe(false);
    expect(second.executionId).not.toBe(first.executionId);
    expect(await tombstoneOf(second.executionId)).toBeNull();
    // The old id answers as removed, the new one as itself.
    const gone = await callApp(h, "GET", `/v1/executions/${first.executionId}`);
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { detail: string }).detail).toMatch(/removed|retention/i);
    expect((await callApp(h, "GET", `/v1/executions/${second.executionId}`)).status).toBe(200);
  });

  it("a chain longer than the ledger removes at once is held whole, never cut: nothing of it goes, foreign keys stay clean", async () => {
    const members = MAX_CHAIN_MEMBERS + 1;
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
       INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                               payload, started_over_from, lineage_id, created_at, updated_at, finished_at)
       SELECT 'long-' || i, 'w', 'wf', 'v', 'received', 'start_over', 'forced', NULL, 'COMPLETED',
              '{}', CASE WHEN i > 1 THEN 'long-' || (i - 1) END, 'long-1', 1, 1, 2 FROM n`,
    )
      .bind(members)
      .run();
    const now = 2 + 31 * DAY;
    const { report } = await sweepAt(now);
    expect(report.held).toBeGreaterThanOrEqual(members);
    const left = await env.DB.prepare("SELECT count(*) AS n, min(purge_at) AS due FROM executions WHERE id LIKE 'long-%'").first<{
      n: number;
      due: number;
    }>();
    expect(left).toEqual({ n: members, due: now + 3_600_000 }); // looked at again in an hour
    expect(await foreignKeyProblems()).toEqual([]);
  });

  it("tombstones past their time go, in batches that keep up with the removals (more than one batch a sweep)", async () => {
    const at = 5_000_000_000_000;
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1200)
       INSERT INTO execution_tombstones
         (id, workspace, workflow_id, status, created_at, finished_at, removed_at, reason, archived, expires_at)
       SELECT 'tomb-' || i, 'w', 'wf', 'COMPLETED', 1, 2, 3, 'retention', 0, ?1 + (i > 1100) * 1000 FROM n`,
    )
      .bind(at)
      .run();
    const { report } = await sweepAt(at);
    expect(report.tombstones).toBeGreaterThanOrEqual(1100);
    const left = await env.DB.prepare("SELECT count(*) AS n FROM execution_tombstones WHERE id LIKE 'tomb-%'").first<{ n: number }>();
    expect(left!.n).toBe(100); // not yet past their time
  });

  it("one sweep at a time per database: a second invocation during a live lease does nothing", async () => {
    const now = Date.now() + 400 * DAY;
    const [a, b] = await Promise.all([runHistorySweep(env, { now, via: "cron" }), runHistorySweep(env, { now, via: "cron" })]);
    expect([a.skipped, b.skipped].sort()).toEqual([false, true]);
    // Released: the next tick sweeps.
    expect((await runHistorySweep(env, { now: now + 1, via: "cron" })).skipped).toBe(false);
  });
});
