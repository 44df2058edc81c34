/**
 * One live execution per trigger (SPEC sections 3, 4 and 9; docs/ledger.md "One live execution per
 * trigger"): an identity whose window ended — by a cancel that released it, or by time, while its
 * execution was FAILED or still RUNNING — is taken over by the next trigger only while no
 * execution of that trigger is live, and a start over or an operator retry is refused while a
 * later execution of the same trigger runs. Every scenario in both orders and concurrently, on the
 * real start batch, the real ledger and real D1 (the harness's clock moves the windows).
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { StoredWorkflow } from "../../src/definitions/store";
import { startWorkflowExecution, type StartResult } from "../../src/ingress/start";
import { cancelExecution, retryFailedStep, sweepExpiredIdentities } from "../../src/ledger";
import type { StepMessage } from "../../src/steps/messages";
import { migrationSql, runMigration } from "../helpers/migrations";
import { callApp, chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "../steps/helpers";

const WS = "dev"; // dev-token's workspace
const WINDOW_MS = 90_000;

/** entry (a 90 s dedupe window) → charge (its key from the order id) → done; and one order of it. */
async function setup() {
  const input = chargeWorkflow(unique("wf"));
  input.vertices[0] = { id: "received", type: "ENTRY_POINT", config: { dedupeWindow: "90s" } };
  const wf = await seedWorkflow(WS, input);
  return { wf, payload: { order: { id: unique("O"), total: 7 } }, clientId: unique("client") };
}

type Trigger = Awaited<ReturnType<typeof setup>>;

/** The sender's trigger (a client-supplied identity), on the harness's clock. */
const trigger = (h: Harness, t: Trigger): Promise<StartResult> =>
  startWorkflowExecution(
    { db: env.DB, queue: h.queue as unknown as Queue<StepMessage>, now: h.clock.now },
    { workflow: t.wf, triggerKind: "webhook", payload: t.payload, identity: { kind: "client", material: t.clientId, scope: "production" } },
  );

const startOver = (h: Harness, t: Trigger, from: string) => h.startOver(t.wf, t.payload, from);
const retry = (h: Harness, id: string) => retryFailedStep(env.DB, WS, { executionId: id, vertexId: "charge" }, h.clock.now());

/** Every execution of the workflow that is RUNNING: the invariant is at most one. */
async function live(wf: StoredWorkflow): Promise<string[]> {
  const { results } = await env.DB.prepare("SELECT id FROM executions WHERE workflow_id = ?1 AND workspace = ?2 AND status = 'RUNNING'")
    .bind(wf.workflowId, WS)
    .all<{ id: string }>();
  return results.map((r) => r.id);
}

async function lineageOf(id: string): Promise<string> {
  return (await env.DB.prepare("SELECT lineage_id FROM executions WHERE id = ?1").bind(id).first<{ lineage_id: string }>())!.lineage_id;
}

/** The first execution of the trigger, RUNNING: its charge DISPATCHED, its message left in the queue. */
async function running(h: Harness, t: Trigger): Promise<string> {
  const first = await trigger(h, t);
  expect(first).toMatchObject({ deduplicated: false, status: "RUNNING" });
  h.queue.take();
  return first.executionId;
}

/** The first execution of the trigger, FAILED (three 500s); then its window ends. */
async function failedPastWindow(h: Harness, t: Trigger): Promise<string> {
  const first = await trigger(h, t);
  h.dest.fault("/payments/charges", 500, 3);
  await h.drain();
  expect(await executionStatus(first.executionId)).toBe("FAILED");
  h.clock.advance(WINDOW_MS);
  return first.executionId;
}

/** The first execution of the trigger, cancelled with its identity released. */
async function released(h: Harness, t: Trigger): Promise<string> {
  const id = await running(h, t);
  h.clock.advance(1); // a cancel in the millisecond of the claim leaves the window until the next one
  expect(await cancelExecution(env.DB, WS, id, h.clock.now(), { releaseIdentity: true })).toMatchObject({ identityReleased: true });
  return id;
}

/**
 * Rounds of each race: the operator action starts at once (its one batch then usually commits
 * before the trigger's, which hashes and plans first), or `ms` after the trigger (then usually
 * after it). Both are in flight together either way; the rounds see both orders.
 */
const STAGGER_MS = [null, 0, null, 1, null, 4];

/**
 * Of a trigger and an operator action run together, exactly one started (or reopened) something:
 * the trigger that lost is a duplicate of the live execution, the action that lost is `refused`.
 */
async function race(h: Harness, t: Trigger, operator: () => Promise<unknown>, refused: object, staggerMs: number | null) {
  const action = staggerMs === null ? operator() : new Promise((resolve) => setTimeout(resolve, staggerMs)).then(operator);
  const [triggered, acted] = await Promise.allSettled([trigger(h, t), action]);
  expect(triggered.status).toBe("fulfilled");
  const sent = (triggered as PromiseFulfilledResult<StartResult>).value;
  const running = await live(t.wf);
  expect(running).toHaveLength(1);
  if (sent.deduplicated) {
    expect(sent).toMatchObject({ executionId: running[0], status: "RUNNING" });
    expect(acted.status === "fulfilled" && (acted.value as { retried?: boolean }).retried !== false).toBe(true);
  } else {
    expect(sent.executionId).toBe(running[0]);
    expect(acted).toMatchObject(refused);
  }
  return running[0]!;
}

describe("a released identity (cancel with releaseIdentity)", () => {
  it("trigger first: the new execution joins the trigger's lineage, and a start over of the cancelled one is refused", async () => {
    const h = harness();
    const t = await setup();
    const cancelled = await released(h, t);
    const second = await trigger(h, t);
    expect(second).toMatchObject({ deduplicated: false, status: "RUNNING" });
    expect(await lineageOf(second.executionId)).toBe(await lineageOf(cancelled));
    await expect(startOver(h, t, cancelled)).rejects.toMatchObject({
      code: "live-execution-exists",
      detail: expect.stringContaining(second.executionId),
    });
    expect(await live(t.wf)).toEqual([second.executionId]);
    // Once it finished, the start over goes through: one charge per live execution, never two at once.
    await h.drain();
    expect(await executionStatus(second.executionId)).toBe("COMPLETED");
    expect((await startOver(h, t, cancelled)).deduplicated).toBe(false);
  });

  it("start over first: a trigger is a duplicate of the live start over, counted on it", async () => {
    const h = harness();
    const t = await setup();
    const cancelled = await released(h, t);
    const restarted = await startOver(h, t, cancelled);
    const again = await trigger(h, t);
    expect(again).toEqual({ executionId: restarted.executionId, deduplicated: true, identity: "client", status: "RUNNING" });
    expect(await live(t.wf)).toEqual([restarted.executionId]);
    const counted = await env.DB.prepare("SELECT duplicate_deliveries AS n FROM executions WHERE id = ?1")
      .bind(restarted.executionId)
      .first<{ n: number }>();
    expect(counted!.n).toBe(1);
    const event = await env.DB.prepare(
      `SELECT d.value ->> 2 AS trigger_kind, d.value ->> 3 AS identity_kind
       FROM executions e, json_each(e.duplicate_log) d WHERE e.id = ?1`,
    )
      .bind(restarted.executionId)
      .all();
    expect(event.results).toEqual([{ trigger_kind: "webhook", identity_kind: "client" }]);
    // Once the start over finished, the released identity starts anew.
    await h.drain();
    h.clock.advance(1);
    const next = await trigger(h, t);
    expect(next.deduplicated).toBe(false);
    expect(await lineageOf(next.executionId)).toBe(await lineageOf(cancelled));
    await h.drain();
    expect(h.dest.effects).toHaveLength(1); // the same key, three executions: the destination charged once
  });

  it("concurrently: a trigger and a start over leave one live execution", async () => {
    for (const staggerMs of STAGGER_MS) {
      const h = harness();
      const t = await setup();
      const cancelled = await released(h, t);
      const only = await race(h, t, () => startOver(h, t, cancelled), { reason: { code: "live-execution-exists" } }, staggerMs);
      expect(await lineageOf(only)).toBe(await lineageOf(cancelled));
    }
  });

  it("through the routes: the issue's scenario answers 409 live-execution-exists", async () => {
    const h = harness();
    const t = await setup();
    const send = async () =>
      (await (await callApp(h, "POST", `/v1/workflows/${t.wf.workflowId}/trigger`, { body: t.payload })).json()) as StartResult;
    const first = await send();
    const cancelled = await callApp(h, "POST", `/v1/executions/${first.executionId}/cancel`, {
      key: unique("op"),
      body: { releaseIdentity: true },
    });
    expect(await cancelled.json()).toMatchObject({ identityReleased: true });
    const second = await send();
    expect(second.deduplicated).toBe(false);
    const refused = await callApp(h, "POST", `/v1/executions/${first.executionId}/start-over`, { key: unique("op") });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ code: "live-execution-exists", detail: expect.stringContaining(second.executionId) });
    expect(await live(t.wf)).toEqual([second.executionId]);
  });
});

describe("a window that ended while the execution was FAILED", () => {
  it("trigger first: the new execution runs; a retry and a start over of the failed one are refused naming it", async () => {
    const h = harness();
    const t = await setup();
    const failed = await failedPastWindow(h, t);
    const second = await trigger(h, t);
    expect(second).toMatchObject({ deduplicated: false, status: "RUNNING" });
    expect(await retry(h, failed)).toEqual({ retried: false, reason: "live-execution", liveExecutionId: second.executionId });
    await expect(startOver(h, t, failed)).rejects.toMatchObject({ code: "live-execution-exists" });
    expect((await stepsOf(failed)).charge!.state).toBe("FAILED");
    expect(await live(t.wf)).toEqual([second.executionId]);
  });

  it("retry first: the trigger is a duplicate of the reopened execution", async () => {
    const h = harness();
    const t = await setup();
    const failed = await failedPastWindow(h, t);
    expect(await retry(h, failed)).toMatchObject({ retried: true });
    expect(await trigger(h, t)).toMatchObject({ executionId: failed, deduplicated: true, status: "RUNNING" });
    expect(await live(t.wf)).toEqual([failed]);
  });

  it("start over first: the trigger is a duplicate of the start over", async () => {
    const h = harness();
    const t = await setup();
    const failed = await failedPastWindow(h, t);
    const restarted = await startOver(h, t, failed);
    expect(await trigger(h, t)).toMatchObject({ executionId: restarted.executionId, deduplicated: true, status: "RUNNING" });
    expect(await live(t.wf)).toEqual([restarted.executionId]);
  });

  it("concurrently: a trigger and a retry, or a trigger and a start over, leave one live execution", async () => {
    for (const staggerMs of STAGGER_MS) {
      const h = harness();
      const t = await setup();
      const failed = await failedPastWindow(h, t);
      await race(h, t, () => retry(h, failed), { value: { retried: false, reason: "live-execution" } }, staggerMs);

      // A harness of its own: the first race left messages in this one's queue.
      const g = harness();
      const u = await setup();
      const failedToo = await failedPastWindow(g, u);
      await race(g, u, () => startOver(g, u, failedToo), { reason: { code: "live-execution-exists" } }, staggerMs);
    }
  });
});

describe("a window that ended while the execution was still RUNNING", () => {
  it("a trigger is a duplicate of the running execution, not its twin", async () => {
    const h = harness();
    const t = await setup();
    const first = await running(h, t);
    h.clock.advance(WINDOW_MS + 1);
    expect(await trigger(h, t)).toEqual({ executionId: first, deduplicated: true, identity: "client", status: "RUNNING" });
    expect(await live(t.wf)).toEqual([first]);
    expect(h.queue.pending).toEqual([]); // nothing dispatched for a second execution
  });

  it("start over or retry first (both refused while it runs), then a trigger: still one execution", async () => {
    const h = harness();
    const t = await setup();
    const first = await running(h, t);
    h.clock.advance(WINDOW_MS + 1);
    await expect(startOver(h, t, first)).rejects.toMatchObject({ code: "execution-running" });
    expect(await retry(h, first)).toMatchObject({ retried: false, reason: "not-failed" });
    expect(await trigger(h, t)).toMatchObject({ executionId: first, deduplicated: true });
    expect(await live(t.wf)).toEqual([first]);
  });

  it("concurrently: triggers, a start over and a retry while it runs leave it the only one", async () => {
    const h = harness();
    const t = await setup();
    const first = await running(h, t);
    h.clock.advance(WINDOW_MS + 1);
    const [a, b, c, over, retried] = await Promise.allSettled([
      trigger(h, t),
      trigger(h, t),
      trigger(h, t),
      startOver(h, t, first),
      retry(h, first),
    ]);
    for (const sent of [a, b, c]) expect(sent).toMatchObject({ status: "fulfilled", value: { executionId: first, deduplicated: true } });
    expect(over).toMatchObject({ status: "rejected", reason: { code: "execution-running" } });
    expect(retried).toMatchObject({ status: "fulfilled", value: { retried: false } });
    expect(await live(t.wf)).toEqual([first]);
  });

  it("after the identity row was swept too; once it finished, the next trigger starts anew in its lineage", async () => {
    const h = harness();
    const t = await setup();
    const first = await running(h, t);
    h.clock.advance(WINDOW_MS + 1);
    await sweepExpiredIdentities(env.DB, h.clock.now());
    expect(await trigger(h, t)).toMatchObject({ executionId: first, deduplicated: true, status: "RUNNING" });
    expect(await live(t.wf)).toEqual([first]);

    await deliverHeldCharge(h, first);
    expect(await executionStatus(first)).toBe("COMPLETED");
    h.clock.advance(1);
    const next = await trigger(h, t);
    expect(next.deduplicated).toBe(false);
    expect(next.executionId).not.toBe(first);
    // One lineage, named by the trigger's identity (a value, not the first execution's id: migrations/0026).
    expect(await lineageOf(next.executionId)).toBe(await lineageOf(first));
    const identity = await env.DB.prepare("SELECT identity FROM executions WHERE id = ?1").bind(first).first<string>("identity");
    expect(await lineageOf(first)).toBe(identity);
  });

  it("a swept identity whose start over is live: the trigger is a duplicate of the start over", async () => {
    const h = harness();
    const t = await setup();
    const failed = await failedPastWindow(h, t);
    await sweepExpiredIdentities(env.DB, h.clock.now());
    const restarted = await startOver(h, t, failed);
    expect(await trigger(h, t)).toMatchObject({ executionId: restarted.executionId, deduplicated: true, status: "RUNNING" });
    expect(await live(t.wf)).toEqual([restarted.executionId]);
  });
});

/** Deliver the charge message `running` held back, and let the execution finish. */
async function deliverHeldCharge(h: Harness, id: string) {
  h.queue.pending.push({ body: { executionId: id, vertexId: "charge" }, dueAt: h.clock.now() });
  await h.drain();
}

describe("migrations/0015: executions of one trigger started before it joined them into one lineage", () => {
  const migration = migrationSql(15);
  const hash = (c: string) => c.repeat(64);

  const execution = (id: string, identity: string | null, status: string, lineage: string, from: string | null = null) =>
    env.DB.prepare(
      `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload,
                               started_over_from, lineage_id, created_at, updated_at, finished_at)
       VALUES (?1, 'mig15', 'wf', 'v1', 'received', ?2, ?3, ?4, ?5, '{}', ?6, ?7, 1, 1, ?8)`,
    ).bind(
      id,
      from ? "start_over" : identity ? "webhook" : "test",
      identity ? "client" : "forced",
      identity,
      status,
      from,
      lineage,
      status === "RUNNING" ? null : 2,
    );

  it("moves every later window's lineage, start overs included, into the first execution's; leaves the rest; twice is once", async () => {
    const [first, later, laterRestart, other, testRun] = [hash("a"), hash("b"), hash("c"), hash("d"), hash("e")];
    await env.DB.batch([
      execution(first, first, "FAILED", first), // the trigger's first execution: its id is the identity
      execution(later, first, "RUNNING", later), // a later window of the same trigger, in a lineage of its own
      execution(laterRestart, null, "COMPLETED", later, later), // a start over of it
      execution(other, other, "COMPLETED", other), // another trigger's first execution
      execution(testRun, null, "COMPLETED", testRun), // a test run: no identity
    ]);
    const lineages = async () =>
      Object.fromEntries(
        (
          await env.DB.prepare("SELECT id, lineage_id FROM executions WHERE workspace = 'mig15'").all<{ id: string; lineage_id: string }>()
        ).results.map((r) => [r.id, r.lineage_id]),
      );
    const expected = { [first]: first, [later]: first, [laterRestart]: first, [other]: other, [testRun]: testRun };
    for (let run = 0; run < 2; run++) {
      await runMigration(migration);
      expect(await lineages()).toEqual(expected);
    }
  });
});
