/**
 * Events and waits in the history (SPEC sections 12 and 14, docs/waits.md): the retention sweep
 * removes a finished execution's wait registrations but leaves the events it took — a sender's
 * duplicate still answers with the first delivery's outcome — until the events sweep removes them
 * after EVENT_HISTORY; an erasure blanks the events only the execution took at once (their data may be
 * personal), keeping a payload-free dedupe record (test/history/erase-events.test.ts: the rest). Real
 * D1, the harness's clock.
 */
import { env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { ingestEvent } from "../../src/events/ingest";
import { DAY, sweepAt } from "./helpers";
import { callApp, executionStatus, harness, seedWorkflow, unique, type Harness } from "../steps/helpers";

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const WS = "dev";

const waiting = (): WorkflowDefinitionInput => ({
  id: unique("wf"),
  vertices: [
    { id: "entry", type: "ENTRY_POINT", config: {} },
    { id: "confirm", type: "WAIT_FOR_EVENT", config: { event: "order.paid", match: "= payload.order", timeout: "1h" } },
  ],
  edges: [{ from: "entry", to: "confirm" }],
});

const send = (h: Harness, match: string, id: string) =>
  ingestEvent(
    { name: "order.paid", match, id, data: { card: "4242" } },
    { db: env.DB, queue: h.queue, vars: {}, workspace: WS, source: null, now: h.clock.now() },
  );

async function count(table: string, where: string, value: string): Promise<number> {
  return (await env.DB.prepare(`SELECT count(*) AS n FROM ${table} WHERE ${where} = ?1`).bind(value).first<{ n: number }>())!.n;
}

/** A completed execution whose wait took the event `eventId`. */
async function tookAnEvent(h: Harness) {
  const order = unique("O");
  const eventId = unique("evt");
  const id = await h.start(await seedWorkflow(WS, waiting()), { order });
  await h.deliver(h.queue.take().map((m) => m.body));
  await send(h, order, eventId);
  await h.drain();
  expect(await executionStatus(id)).toBe("COMPLETED");
  return { id, order, eventId };
}

describe("events in the history", () => {
  it("the retention sweep removes the waits with the execution; the event stays and still answers its duplicates", async () => {
    const h = harness();
    const { id, order, eventId } = await tookAnEvent(h);
    expect(await count("event_waits", "execution_id", id)).toBe(1);
    await sweepAt(h.clock.now() + 8 * DAY);
    expect(await count("executions", "id", id)).toBe(0);
    expect(await count("event_waits", "execution_id", id)).toBe(0);
    expect(await count("events", "event_id", eventId)).toBe(1);
    const again = await send(h, order, eventId);
    expect(again.answer).toMatchObject({ deduplicated: true, resumed: [id] });
  });

  it("the events sweep removes events past EVENT_HISTORY with their consumption records, and no newer one", async () => {
    const h = harness();
    const { id, eventId } = await tookAnEvent(h);
    const fresh = unique("fresh");
    h.clock.t += 6 * DAY;
    await send(h, unique("O"), fresh);
    const { report } = await sweepAt(h.clock.now() + DAY + 1, { eventHistoryMs: 7 * DAY });
    expect(report.events).toBeGreaterThanOrEqual(1);
    expect(await count("events", "event_id", eventId)).toBe(0);
    expect(await count("event_consumptions", "execution_id", id)).toBe(0);
    expect(await count("events", "event_id", fresh)).toBe(1);
  });

  it("an erasure blanks the events only the execution took at once (a payload-free dedupe record stays)", async () => {
    const h = harness();
    const { id, eventId } = await tookAnEvent(h);
    const erased = await callApp(h, "DELETE", `/v1/executions/${id}`, { key: unique("erase") });
    expect(erased.status).toBe(200);
    const row = await env.DB.prepare("SELECT data, match_value, erased_at FROM events WHERE event_id = ?1")
      .bind(eventId)
      .first<{ data: string | null; match_value: string; erased_at: number | null }>();
    expect(row).toMatchObject({ data: null, match_value: "null" });
    expect(row!.erased_at).not.toBeNull();
    expect(await count("event_consumptions", "execution_id", id)).toBe(0);
    expect(await count("event_waits", "execution_id", id)).toBe(0);
  });
});
