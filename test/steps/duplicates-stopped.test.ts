/**
 * Duplicates counted where they were stopped (SPEC section 9): each counter of the trace's
 * `duplicatesStopped` moves in the batch that stopped the duplicate — the trigger's dedupe, the
 * claim (a redelivered message), the fence (a late write), the destination's own store — and the
 * list filters and `GET /v1/stats` read them, each in one query.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { listQuery } from "../../src/ledger";
import { DROP_REDELIVERY_AT_ATTEMPT } from "../../src/steps/redelivery";
import { countingD1 } from "../helpers/counting-d1";
import { callApp, chargeWorkflow, harness, seedWorkflow, unique, type Harness } from "./helpers";

const WS = "dev"; // dev-token's workspace

interface Summary {
  executionId: string;
  duplicateTriggers: Array<{ seq: number; at: string; trigger: string; identity: string }>;
  duplicatesStopped: { triggers: number; redeliveries: number; fencedOut: number; destinationReplays: number };
  maxAttempt: number;
}

const traceOf = async (h: Harness, id: string) => (await (await callApp(h, "GET", `/v1/executions/${id}`)).json()) as Summary;
const list = async (h: Harness, query: string) =>
  ((await (await callApp(h, "GET", `/v1/executions?${query}`)).json()) as { items: Summary[] }).items.map((i) => i.executionId);

const stops = (triggers: number, redeliveries: number, fencedOut: number, destinationReplays: number) => ({
  triggers,
  redeliveries,
  fencedOut,
  destinationReplays,
});

describe("duplicates stopped, counted where they were stopped", () => {
  it("a duplicate trigger, a redelivered message, a fenced-out write and a destination replay each count once", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const payload = { order: { id: unique("D"), total: 3 } };
    const started = (await (await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload })).json()) as Summary;
    const id = started.executionId;
    await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload }); // the sender retries
    expect((await traceOf(h, id)).duplicatesStopped).toEqual(stops(1, 0, 0, 0));
    expect((await traceOf(h, id)).duplicateTriggers).toEqual([{ seq: 1, at: expect.any(String), trigger: "webhook", identity: "content" }]);

    // The charge commits, its answer is lost: the retry is answered from the destination's store.
    h.dest.fault("/payments/charges", 502, 1, { afterCommit: true });
    const [charge] = h.queue.take();
    h.queue.pending.push({ body: charge!.body, dueAt: h.clock.now() });
    await h.drain();
    expect((await traceOf(h, id)).duplicatesStopped).toEqual(stops(1, 0, 0, 1));

    // The queue delivers the charge's message again: the claim finds the step settled.
    await h.deliver([charge!.body]);
    expect((await traceOf(h, id)).duplicatesStopped).toEqual(stops(1, 1, 0, 1));
    const dropped = await env.DB.prepare("SELECT detail FROM step_events WHERE execution_id = ?1 AND type = 'redelivery_dropped'")
      .bind(id)
      .all<{ detail: string }>();
    expect(dropped.results.map((r) => r.detail)).toEqual([
      expect.stringMatching(/^message msg-\d+ \(delivery 1\) acked: the step was already COMPLETED$/),
    ]);
    expect((await traceOf(h, id)).maxAttempt).toBe(2);
  });

  it("a late settle of a worker that lost its step is fenced out; a message dropped while the step waits, a redelivery", async () => {
    const h = harness({ leaseMs: 1_000 });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("F"), total: 3 } });
    const [first] = h.queue.take();
    // Worker 1 makes the call; before it settles, its lease runs out and worker 2 takes the step over.
    await h.deliver([first!.body], {
      afterRun: async () => {
        h.clock.advance(5_000);
        await h.deliver([first!.body], { afterRun: async () => void (await h.deliver([first!.body], {}, DROP_REDELIVERY_AT_ATTEMPT)) });
      },
    });
    // Worker 2's call was answered from the destination's store (worker 1's had gone through);
    // inside its run a redundant message was dropped (the step was EXECUTING under worker 2's live
    // lease); worker 1's settle came last and was fenced out.
    expect((await traceOf(h, id)).duplicatesStopped).toEqual(stops(0, 1, 1, 1));
  });

  it("keeps the first 100 duplicate triggers one by one, then only counts", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const payload = { order: { id: unique("K"), total: 1 } };
    const trigger = () => callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload });
    const id = ((await (await trigger()).json()) as Summary).executionId;
    await trigger();
    await env.DB.prepare("UPDATE executions SET duplicate_deliveries = 99 WHERE id = ?1").bind(id).run();
    await trigger(); // the 100th
    await trigger(); // the 101st: counted, not kept
    const trace = await traceOf(h, id);
    expect(trace.duplicatesStopped.triggers).toBe(101);
    expect(trace.duplicateTriggers.map((d) => d.seq)).toEqual([1, 100]);
  });

  it("costs no round trip: a claim is one batch, a Gateway settle one batch", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    await h.start(wf, { order: { id: unique("B"), total: 1 } });
    const [first] = h.queue.take();
    counting.reset();
    await h.deliver([first!.body]);
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch", "batch"]); // claim, persist key, settle
  });
});

describe("finding executions by what happened to them", () => {
  it("filters by had-duplicates, retried and a time range, newest first", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const t0 = h.clock.now();
    const plain = await h.start(wf, { order: { id: unique("P"), total: 1 } });
    await h.drain();
    h.clock.t = t0 + 60_000;
    const retried = await h.start(wf, { order: { id: unique("R"), total: 1 } });
    h.dest.fault("/payments/charges", 500, 1);
    await h.drain();
    h.clock.t = t0 + 120_000;
    const duplicated = await h.start(wf, { order: { id: unique("T"), total: 1 } });
    await env.DB.prepare("UPDATE executions SET duplicate_deliveries = 2 WHERE id = ?1").bind(duplicated).run();

    const w = `workflowId=${wf.workflowId}`;
    expect(await list(h, w)).toEqual([duplicated, retried, plain]);
    expect(await list(h, `${w}&retried=true`)).toEqual([retried]);
    expect(await list(h, `${w}&hadDuplicates=true`)).toEqual([duplicated]);
    expect(await list(h, `${w}&hadDuplicates=false`)).toEqual([duplicated, retried, plain]);
    const at = (ms: number) => new Date(ms).toISOString();
    expect(await list(h, `${w}&since=${at(t0 + 1)}`)).toEqual([duplicated, retried]);
    expect(await list(h, `${w}&since=${at(t0)}&until=${at(t0 + 60_000)}`)).toEqual([plain]);
    const bad = await callApp(h, "GET", `/v1/executions?since=yesterday`);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: "invalid-query" });
    expect((await callApp(h, "GET", `/v1/executions?retried=yes`)).status).toBe(400);
  });

  it("each filter is one query on an index, walked in order (the query plans)", async () => {
    const plan = async (filter: Parameters<typeof listQuery>[1]) => {
      const { sql, params } = listQuery("dev", filter);
      const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .bind(...params)
        .all<{ detail: string }>();
      return results.map((r) => r.detail).join(" | ");
    };
    expect(await plan({ limit: 20 })).toMatch(/USING INDEX executions_by_workspace/);
    expect(await plan({ limit: 20, hadDuplicates: true })).toMatch(/USING INDEX executions_with_duplicates/);
    expect(await plan({ limit: 20, retried: true })).toMatch(/USING INDEX executions_retried/);
    expect(await plan({ limit: 20, workflowId: "wf", status: "FAILED" })).toMatch(/USING INDEX executions_by_(workflow|status)/);
    expect(await plan({ limit: 20, status: "RUNNING" })).toMatch(/USING INDEX executions_by_status/);
    const filters = [
      {},
      { hadDuplicates: true },
      { retried: true },
      { since: 1, until: 2 },
      { workflowId: "wf" },
      { status: "FAILED" as const },
    ];
    for (const filter of filters) {
      const text = await plan({ limit: 20, ...filter });
      expect(text).not.toMatch(/SCAN executions(?! USING)/);
      expect(text).not.toMatch(/TEMP B-TREE/); // the index is in the list's order: no sort
    }
  });

  it("GET /v1/stats sums them per workflow since a time", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const payload = { order: { id: unique("S"), total: 1 } };
    for (let i = 0; i < 3; i++) await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload });
    const since = new Date(Date.now() - 60_000).toISOString();
    const stats = (await (await callApp(h, "GET", `/v1/stats?since=${since}`)).json()) as {
      workflows: Array<{ workflowId: string; executions: number; triggers: number }>;
      total: { triggers: number };
    };
    expect(stats.workflows.find((w) => w.workflowId === wf.workflowId)).toEqual({
      workflowId: wf.workflowId,
      executions: 1,
      triggers: 2,
      redeliveries: 0,
      fencedOut: 0,
      destinationReplays: 0,
    });
    expect(stats.total.triggers).toBeGreaterThanOrEqual(2);
    expect((await callApp(h, "GET", "/v1/stats", { token: "other-token" })).status).toBe(200);
    const other = (await (await callApp(h, "GET", `/v1/stats?since=${since}`, { token: "other-token" })).json()) as {
      workflows: unknown[];
    };
    expect(other.workflows).toEqual([]);
  });
});
