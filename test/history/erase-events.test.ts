/**
 * Erasure × events (issue 41 finding 3 and its Medium items; docs/waits.md "Erasure", docs/history-archive.md):
 * - erasing one of two executions that took one broadcast keeps the event for the other (it still
 *   resumes with it) and corrupts nothing: the next event on the shard — another workspace's — is
 *   buffered, not born taken, and its wait gets it;
 * - an event only the erased execution took keeps a payload-free dedupe record: the provider's retry
 *   is a duplicate and resumes no other wait;
 * - erasing an execution the sweep already removed blanks the event it took (kept for EVENT_HISTORY);
 * - the identity claim's business-value hashes go with an erasure;
 * - a sweep's archive put that lands after an erasure leaves no object behind.
 * Real D1 and the pool's R2 bucket; two workspaces on this file's one database (one shard).
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { ingestEvent } from "../../src/events/ingest";
import { archiveKey, createArchiver } from "../../src/history/archive";
import { eraseExecution } from "../../src/history/erase";
import { DAY, executionRow, rowsOf, sweepAt, tombstoneOf } from "./helpers";
import { callApp, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "../steps/helpers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const WS = "dev";
const OTHER = "other";
const EVENT = "order.paid";

const waiting = (consume: "one" | "all" = "one"): WorkflowDefinitionInput => ({
  id: unique("wf"),
  vertices: [
    { id: "entry", type: "ENTRY_POINT", config: {} },
    { id: "confirm", type: "WAIT_FOR_EVENT", config: { event: EVENT, match: "= payload.order", timeout: "1h", consume } },
    { id: "done", type: "TRANSFORM", config: { output: { got: "= steps.confirm.data" } } },
  ],
  edges: [
    { from: "entry", to: "confirm" },
    { from: "confirm", to: "done" },
  ],
});

const send = (h: Harness, workspace: string, match: string, id: string, data: unknown) =>
  ingestEvent({ name: EVENT, match, id, data }, { db: env.DB, queue: h.queue, vars: {}, workspace, source: null, now: h.clock.now() });

/** Starts an execution of `wf` waiting on `order`, and parks its wait. */
async function parked(h: Harness, wf: Awaited<ReturnType<typeof seedWorkflow>>, order: string): Promise<string> {
  const id = await h.start(wf, { order });
  const first = h.queue.take().find((m) => m.body.executionId === id)!;
  await h.deliver([first.body]);
  expect((await stepsOf(id)).confirm!.state).toBe("EXECUTING");
  return id;
}

/** Delivers the pending messages of one execution only (the others stay pending). */
async function runOnly(h: Harness, executionId: string): Promise<void> {
  for (let round = 0; round < 20; round++) {
    const mine = h.queue.pending.filter((m) => m.body.executionId === executionId);
    if (mine.length === 0) return;
    h.queue.pending = h.queue.pending.filter((m) => !mine.includes(m));
    for (const m of mine) await h.deliver([m.body]);
  }
}

async function eventRow(workspace: string, eventId: string) {
  return env.DB.prepare("SELECT data, match_value, consumed_at, erased_at FROM events WHERE workspace = ?1 AND event_id = ?2")
    .bind(workspace, eventId)
    .first<{ data: string | null; match_value: string; consumed_at: number | null; erased_at: number | null }>();
}

const erase = (h: Harness, id: string) => callApp(h, "DELETE", `/v1/executions/${id}`, { key: unique("erase") });

describe("erasing one taker of a broadcast", () => {
  it("keeps the event for the other taker, which resumes with it; the next event on the shard (another workspace) is untaken", async () => {
    const h = harness({}, { database: env.DB });
    const order = unique("B");
    const wf = await seedWorkflow(WS, waiting("all"), env.DB);
    const first = await parked(h, wf, order);
    const second = await parked(h, wf, order);
    const broadcast = unique("bc");
    const { answer } = await send(h, WS, order, broadcast, { paid: 12 });
    expect([...answer.resumed].sort()).toEqual([first, second].sort());
    // The first taker completes; the second's resume is still in the queue.
    await runOnly(h, first);
    expect(await executionStatus(first)).toBe("COMPLETED");
    expect(await executionStatus(second)).toBe("RUNNING");

    expect((await erase(h, first)).status).toBe(200);
    // The broadcast is the second taker's too: kept whole.
    expect(await eventRow(WS, broadcast)).toMatchObject({ data: '{"paid":12}', erased_at: null });

    // Another workspace on the same shard: its event arrives before its wait, and is buffered — not taken.
    const otherOrder = unique("X");
    const otherEvent = unique("evt");
    const buffered = await send(h, OTHER, otherOrder, otherEvent, { other: true });
    expect(buffered.answer).toMatchObject({ deduplicated: false, resumed: [], buffered: true });
    expect((await eventRow(OTHER, otherEvent))!.consumed_at).toBeNull();

    // The second taker resumes with the broadcast (not the other workspace's event).
    await runOnly(h, second);
    expect(await executionStatus(second)).toBe("COMPLETED");
    expect(JSON.parse((await stepsOf(second)).done!.output!)).toEqual({ got: { paid: 12 } });

    // The other workspace's wait gets its event.
    const otherWf = await seedWorkflow(OTHER, waiting(), env.DB);
    const otherId = await h.start(otherWf, { order: otherOrder });
    await runOnly(h, otherId);
    expect(await executionStatus(otherId)).toBe("COMPLETED");
    expect(JSON.parse((await stepsOf(otherId)).done!.output!)).toEqual({ got: { other: true } });

    // Erasing the second taker too leaves the broadcast as a payload-free record, and the other workspace's event whole.
    expect((await erase(h, second)).status).toBe(200);
    expect(await eventRow(WS, broadcast)).toMatchObject({ data: null, match_value: "null" });
    expect(await eventRow(OTHER, otherEvent)).toMatchObject({ data: '{"other":true}', erased_at: null });
    const orphans = await env.DB.prepare(
      "SELECT count(*) AS n FROM event_consumptions c WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = c.event_rowid)",
    ).first<{ n: number }>();
    expect(orphans!.n).toBe(0);
  });
});

describe("an event only the erased execution took", () => {
  it("keeps a payload-free dedupe record: the provider's retry is a duplicate and resumes no other wait", async () => {
    const h = harness({}, { database: env.DB });
    const order = unique("P");
    const wf = await seedWorkflow(WS, waiting(), env.DB);
    const taker = await parked(h, wf, order);
    const eventId = unique("evt");
    expect((await send(h, WS, order, eventId, { card: "4242" })).answer.resumed).toEqual([taker]);
    await runOnly(h, taker);
    expect(await executionStatus(taker)).toBe("COMPLETED");

    expect((await erase(h, taker)).status).toBe(200);
    const row = await eventRow(WS, eventId);
    expect(row).toMatchObject({ data: null, match_value: "null" });
    expect(row!.erased_at).not.toBeNull();
    expect(row!.consumed_at).not.toBeNull();
    expect((await rowsOf(taker)).executions).toBe(0);

    // Another wait opens on the same value; the provider retries the erased event.
    const next = await parked(h, wf, order);
    const retry = await send(h, WS, order, eventId, { card: "4242" });
    expect(retry.answer).toMatchObject({ deduplicated: true, resumed: [] });
    expect(await executionStatus(next)).toBe("RUNNING");
    expect((await stepsOf(next)).confirm!.output).toBeNull();
    // Its own new event still reaches it.
    expect((await send(h, WS, order, unique("evt"), { card: "new" })).answer.resumed).toEqual([next]);
  });

  it("an execution the sweep already removed: its erasure blanks the event it took (kept for EVENT_HISTORY)", async () => {
    const h = harness({}, { database: env.DB });
    const order = unique("S");
    const wf = await seedWorkflow(WS, waiting(), env.DB);
    const taker = await parked(h, wf, order);
    const eventId = unique("evt");
    await send(h, WS, order, eventId, { card: "4242" });
    await runOnly(h, taker);
    const row = (await executionRow(taker))!;
    await sweepAt(row.finishedAt + 31 * DAY);
    expect((await rowsOf(taker)).executions).toBe(0);
    expect((await eventRow(WS, eventId))!.data).toBe('{"card":"4242"}');

    expect((await erase(h, taker)).status).toBe(200);
    expect(await eventRow(WS, eventId)).toMatchObject({ data: null, match_value: "null" });
    const consumptions = await env.DB.prepare("SELECT count(*) AS n FROM event_consumptions WHERE execution_id = ?1")
      .bind(taker)
      .first<{ n: number }>();
    expect(consumptions!.n).toBe(0);
  });
});

describe("the identity claim", () => {
  it("loses its business-value hashes with an erasure (the claim itself stays for its window)", async () => {
    const h = harness({}, { database: env.DB });
    h.clock.t = Date.now(); // the trigger route's clock
    const def = waiting();
    def.vertices[0] = { id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: "order" } };
    const wf = await seedWorkflow(WS, def, env.DB);
    const order = unique("V");
    const started = await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: { order } });
    const { executionId } = (await started.json()) as { executionId: string };
    h.clock.t = Date.now() + 1_000;
    await h.deliver([{ executionId, vertexId: "confirm" }]);
    await send(h, WS, order, unique("evt"), null);
    await runOnly(h, executionId);
    expect(await executionStatus(executionId)).toBe("COMPLETED");
    const hashes = () =>
      env.DB.prepare("SELECT value_hashes FROM execution_identities WHERE execution_id = ?1")
        .bind(executionId)
        .first<{ value_hashes: string | null }>();
    expect((await hashes())?.value_hashes).not.toBeNull();
    expect((await erase(h, executionId)).status).toBe(200);
    const after = await hashes();
    expect(after).not.toBeNull();
    expect(after!.value_hashes).toBeNull();
  });
});

describe("an erasure racing the sweep's archive put", () => {
  it("leaves no object: the put that lands after the erasure is deleted, and GET never serves the trace", async () => {
    const h = harness({}, { database: env.DB });
    const order = unique("R");
    const wf = await seedWorkflow(WS, waiting(), env.DB);
    const id = await parked(h, wf, order);
    await send(h, WS, order, unique("evt"), { card: "4242" });
    await runOnly(h, id);
    expect(await executionStatus(id)).toBe("COMPLETED");
    const row = (await executionRow(id))!;
    const bucket = (env as unknown as { ARCHIVE: R2Bucket }).ARCHIVE;
    // The sweep has read the trace; the erasure runs to the end before its put lands.
    let erased = 0;
    const racing = new Proxy(bucket, {
      get(target, prop) {
        if (prop === "put")
          return async (...args: Parameters<R2Bucket["put"]>) => {
            erased += 1;
            const outcome = await eraseExecution(env.DB, bucket, WS, id, () => row.finishedAt + 31 * DAY);
            expect(outcome.kind).toBe("erased");
            return target.put(...args);
          };
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const { report } = await sweepAt(row.finishedAt + 31 * DAY, { archive: createArchiver(racing, env.DB) });
    expect(erased).toBe(1);
    expect(report.archived).toBe(0);
    expect(await bucket.head(archiveKey({ id, workspace: WS, createdAt: row.createdAt }))).toBeNull();
    expect((await bucket.list({ prefix: `executions/${WS}/${encodeURIComponent(id)}/` })).objects).toEqual([]);
    expect(await tombstoneOf(id)).toMatchObject({ reason: "erased" });
    // Once the tombstone expired too, GET finds nothing.
    await env.DB.prepare("DELETE FROM execution_tombstones WHERE id = ?1").bind(id).run();
    expect((await callApp(h, "GET", `/v1/executions/${id}`)).status).toBe(404);
  });
});
