/**
 * WAIT_FOR_EVENT where it meets the rest (issue 41, docs/waits.md): a wait resumed by an event
 * records no false `lease_expired`; a wait never completes with an event of another name or value
 * even when a consumption under its key says so; the buffer ends at `buffered_until` exactly; a
 * `one` event goes to the OLDEST open wait; `GET /v1/waits` lists the caller's workspace only; the
 * dedupe key keeps event sources and the API apart. Real D1, the real consumer and delivery batch,
 * the harness's clock and queue.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { correlationOf } from "../../src/lib/correlation";
import { ingestEvent } from "../../src/events/ingest";
import { listOpenWaits } from "../../src/ledger";
import { eventSettings } from "../../src/events/settings";
import { sendEvent, startParked, waitingWorkflow } from "./wait-helpers";
import { callApp, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const WS = "dev";
const EVENT = "payment.confirmed";

const parkedWait = (h: Harness, order: string | number, config: Record<string, unknown> = {}) =>
  startParked(h, waitingWorkflow(EVENT, config), order);

async function stepEvents(executionId: string, type: string): Promise<Array<{ vertex_id: string; detail: string | null }>> {
  const { results } = await env.DB.prepare("SELECT vertex_id, detail FROM step_events WHERE execution_id = ?1 AND type = ?2")
    .bind(executionId, type)
    .all<{ vertex_id: string; detail: string | null }>();
  return results;
}

describe("a wait resumed by an event", () => {
  it("records no lease_expired — like a DELAY woken by its timer — and counts no retry", async () => {
    const h = harness();
    const order = unique("L");
    const { id } = await parkedWait(h, order);
    h.clock.t += 60_000;
    const { answer } = await sendEvent(h, { name: EVENT, match: order, data: { ok: 1 } });
    expect(answer.resumed).toEqual([id]);
    h.clock.t += 5_000; // the resume's claim comes a little later than the un-park
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(await stepEvents(id, "lease_expired")).toEqual([]);
    const row = await env.DB.prepare("SELECT max_attempt FROM executions WHERE id = ?1").bind(id).first<{ max_attempt: number }>();
    expect(row!.max_attempt).toBeLessThanOrEqual(1);
  });

  it("records none either when the event commits between the wait's registration and its park", async () => {
    const h = harness();
    const order = unique("G");
    const wf = waitingWorkflow(EVENT);
    const stored = await seedWorkflow(WS, wf);
    const id = await h.start(stored, { order });
    const first = h.queue.take().find((m) => m.body.executionId === id)!;
    await h.deliver([first.body], {
      afterRun: async () => {
        const { answer } = await sendEvent(h, { name: EVENT, match: order, data: "between" });
        expect(answer.resumed).toEqual([id]);
      },
    });
    h.clock.t += 5_000;
    await h.drain();
    expect(JSON.parse((await stepsOf(id)).done!.output!)).toEqual({ got: "between" });
    expect(await stepEvents(id, "lease_expired")).toEqual([]);
  });
});

describe("a wait's event is one it waits for", () => {
  it("a consumption under the wait's key whose event has another name or value is never the wait's event", async () => {
    const h = harness();
    const order = unique("K");
    const other = unique("K-other");
    // Another name and another value, buffered: the wait must not take or complete with either.
    await sendEvent(h, { name: "payment.refunded", match: order, id: unique("wrong-name"), data: "wrong name" });
    await sendEvent(h, { name: EVENT, match: other, id: unique("wrong-match"), data: "wrong value" });
    const { id } = await parkedWait(h, order);
    const wait = await env.DB.prepare("SELECT wait_key FROM event_waits WHERE execution_id = ?1").bind(id).first<{ wait_key: string }>();
    // A consumption under this wait's key naming the wrong event (as a key given twice would leave one).
    for (const data of ['"wrong name"', '"wrong value"']) {
      await env.DB.prepare("DELETE FROM event_consumptions WHERE wait_key = ?1").bind(wait!.wait_key).run();
      await env.DB.prepare(
        `INSERT INTO event_consumptions (wait_key, event_rowid, workspace, execution_id, vertex_id, consumed_at)
         SELECT ?1, id, workspace, ?2, 'confirm', ?3 FROM events WHERE workspace = ?4 AND data = ?5`,
      )
        .bind(wait!.wait_key, id, h.clock.now(), WS, data)
        .run();
      // Its claim comes (a redelivery, a wake-up): it reads what the wait has.
      await env.DB.prepare("UPDATE steps SET lease_until = ?2, parked_until = ?2 WHERE execution_id = ?1 AND vertex_id = 'confirm'")
        .bind(id, h.clock.now())
        .run();
      await h.deliver([{ executionId: id, vertexId: "confirm" }]);
      expect(await executionStatus(id)).toBe("RUNNING");
      expect((await stepsOf(id)).confirm!.output).toBeNull();
    }
    // Its own event still reaches it.
    const { answer } = await sendEvent(h, { name: EVENT, match: order, data: "right" });
    expect(answer.resumed).toEqual([id]);
    await h.drain();
    expect(JSON.parse((await stepsOf(id)).done!.output!)).toEqual({ got: "right" });
  });
});

describe("the buffer and the order of waits", () => {
  it("an event is not taken at the very instant its buffer ends; one ms before, it is", async () => {
    const h = harness();
    const { bufferMs } = eventSettings(env as never);
    const late = unique("E");
    await sendEvent(h, { name: EVENT, match: late, data: "late" });
    const inTime = unique("E");
    await sendEvent(h, { name: EVENT, match: inTime, data: "in time" });
    h.clock.t += bufferMs; // exactly buffered_until
    const lateWait = await parkedWait(h, late);
    expect((await stepsOf(lateWait.id)).confirm!.output).toBeNull();
    const row = await env.DB.prepare("SELECT count(*) AS n FROM event_consumptions WHERE execution_id = ?1")
      .bind(lateWait.id)
      .first<{ n: number }>();
    expect(row!.n).toBe(0);
    h.clock.t -= 1;
    const inTimeWait = await parkedWait(h, inTime);
    await h.drain();
    expect(JSON.parse((await stepsOf(inTimeWait.id)).done!.output!)).toEqual({ got: "in time" });
  });

  it("a `one` event goes to the oldest open wait on its value, not the newest", async () => {
    const h = harness();
    const order = unique("O");
    const oldest = await parkedWait(h, order);
    h.clock.t += 1_000;
    const middle = await parkedWait(h, order);
    h.clock.t += 1_000;
    const newest = await parkedWait(h, order);
    h.clock.t += 1_000;
    expect((await sendEvent(h, { name: EVENT, match: order, data: 1 })).answer.resumed).toEqual([oldest.id]);
    expect((await sendEvent(h, { name: EVENT, match: order, data: 2 })).answer.resumed).toEqual([middle.id]);
    expect((await sendEvent(h, { name: EVENT, match: order, data: 3 })).answer.resumed).toEqual([newest.id]);
  });
});

describe("workspaces and senders", () => {
  it("GET /v1/waits lists the caller's workspace only: another workspace sees none of this one's open waits", async () => {
    const h = harness();
    const order = unique("W");
    const { id } = await parkedWait(h, order);
    const path = `/v1/waits?event=${EVENT}&match=${order}`;
    const mine = (await (await callApp(h, "GET", path)).json()) as { waits: Array<{ executionId: string }> };
    expect(mine.waits.map((w) => w.executionId)).toEqual([id]);
    const theirs = await callApp(h, "GET", path, { token: "other-token" });
    expect(theirs.status).toBe(200);
    expect(((await theirs.json()) as { waits: unknown[] }).waits).toEqual([]);
    // Without the value, too.
    const anyValue = await callApp(h, "GET", `/v1/waits?event=${EVENT}`, { token: "other-token" });
    expect(((await anyValue.json()) as { waits: Array<{ executionId: string }> }).waits.map((w) => w.executionId)).not.toContain(id);
    // The route above may reach another shard (wrangler.toml places `other` on shard 1): on THIS
    // database — as two workspaces placed on one shard share it — the listing keeps them apart too.
    const sameShard = (workspace: string, matchHashes: string[] | null) =>
      listOpenWaits(env.DB, { workspace, name: EVENT, matchHashes, limit: 100 }).then((ws) => ws.map((w) => w.executionId));
    const hash = (await correlationOf(order)) as { hash: string };
    expect(await sameShard(WS, [hash.hash])).toEqual([id]);
    expect(await sameShard("other", [hash.hash])).toEqual([]);
    expect(await sameShard("other", null)).not.toContain(id);
  });

  it("the same sender id from two event sources and from the API is three events, each taken by its own wait", async () => {
    const h = harness();
    const order = unique("S");
    const waits = [await parkedWait(h, order), await parkedWait(h, order), await parkedWait(h, order)];
    const id = unique("evt");
    const deliver = (source: string | null) =>
      ingestEvent(
        { name: EVENT, match: order, id, data: { from: source } },
        { db: h.rt.db, queue: h.queue, vars: env as never, workspace: WS, source, now: h.clock.now() },
      );
    const answers = [await deliver("stripe"), await deliver("adyen"), await deliver(null)].map((d) => d.answer);
    expect(answers.map((a) => a.deduplicated)).toEqual([false, false, false]);
    expect(answers.map((a) => a.resumed)).toEqual(waits.map((w) => [w.id]));
    const stored = await env.DB.prepare("SELECT count(*) AS n FROM events WHERE workspace = ?1 AND event_id = ?2")
      .bind(WS, id)
      .first<{ n: number }>();
    expect(stored!.n).toBe(3);
    // And each one's retry is a duplicate of its own.
    expect((await deliver("adyen")).answer).toMatchObject({ deduplicated: true, resumed: [waits[1]!.id] });
  });
});
