import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { openExecutionEvents, parseEventId, type EventStreamOptions } from "../../src/http/execution-events";
import { cancelExecution } from "../../src/ledger";
import { countingD1 } from "../helpers/counting-d1";
import { chargeWorkflow, failedCharge, harness, seedWorkflow, unique, type Harness } from "../steps/helpers";

interface Sse {
  id?: string;
  event: string;
  data: Record<string, unknown>;
}

function parseSse(text: string): { events: Sse[]; retry: number | null } {
  const events: Sse[] = [];
  let retry: number | null = null;
  for (const block of text.split("\n\n")) {
    const e: Partial<Sse> & { dataText?: string } = {};
    for (const line of block.split("\n")) {
      if (line.startsWith("id: ")) e.id = line.slice(4);
      else if (line.startsWith("event: ")) e.event = line.slice(7);
      else if (line.startsWith("data: ")) e.dataText = line.slice(6);
      else if (line.startsWith("retry: ")) retry = Number(line.slice(7));
    }
    if (e.event) events.push({ id: e.id, event: e.event, data: JSON.parse(e.dataText ?? "null") as Record<string, unknown> });
  }
  return { events, retry };
}

/** The route, read to its end (the body is read while the pump runs, then the context is awaited). */
async function route(h: Harness, executionId: string, init: { token?: string | null; lastEventId?: string; query?: string } = {}) {
  const headers: Record<string, string> = {};
  if (init.token !== null) headers.authorization = `Bearer ${init.token ?? "dev-token"}`;
  if (init.lastEventId !== undefined) headers["last-event-id"] = init.lastEventId;
  const ctx = createExecutionContext();
  const response = await app.fetch(
    new Request(`http://idemflow.test/v1/executions/${executionId}/events${init.query ?? ""}`, { headers }),
    { ...env, QUEUE: h.queue },
    ctx,
  );
  const text = await response.text();
  await waitOnExecutionContext(ctx);
  return { response, text, ...parseSse(text) };
}

/** The stream straight from its module, with test bounds. */
async function stream(db: D1Database, executionId: string, after = "", options: EventStreamOptions = {}) {
  const opened = await openExecutionEvents(db, "dev", executionId, parseEventId(after)!, { pollMs: 1, ...options });
  const text = await new Response(opened!.response.body).text();
  await opened!.done;
  return parseSse(text).events;
}

const position = (id: string) => parseEventId(id)!;
const before = (a: string, b: string) => {
  const [x, y] = [position(a), position(b)];
  return x[0] < y[0] || (x[0] === y[0] && x[1] < y[1]);
};

describe("GET /v1/executions/{id}/events", () => {
  it("answers 401 without a token and the trace's 404 for another workspace or an unknown id, before streaming", async () => {
    const h = harness();
    const { id } = await failedCharge(h, "dev");
    const anonymous = await route(h, id, { token: null });
    expect(anonymous.response.status).toBe(401);
    const other = await route(h, id, { token: "other-token" });
    expect(other.response.status).toBe(404);
    expect(other.response.headers.get("content-type")).toContain("application/problem+json");
    const ctx = createExecutionContext();
    const trace = await app.fetch(
      new Request(`http://idemflow.test/v1/executions/${id}`, { headers: { authorization: "Bearer other-token" } }),
      env,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(JSON.parse(other.text)).toEqual(await trace.json());
    expect((await route(h, "no-such-execution")).response.status).toBe(404);
    expect((await route(h, id, { lastEventId: "12" })).response.status).toBe(400);
  });

  it("streams a finished execution: stable, increasing ids, then execution.finished, and resumes exactly at every id", async () => {
    const h = harness();
    const { id } = await failedCharge(h, "dev");
    const first = await route(h, id);
    expect(first.response.status).toBe(200);
    expect(first.response.headers.get("content-type")).toContain("text/event-stream");
    expect(first.retry).toBeGreaterThan(0);
    const all = first.events;
    const last = all.at(-1)!;
    expect(last).toMatchObject({ event: "execution.finished", data: { executionId: id, status: "FAILED" } });
    const changes = all.slice(0, -1);
    expect(changes.filter((e) => e.event === "attempt").length).toBeGreaterThanOrEqual(3);
    expect(changes.some((e) => e.event === "step.event" && e.data.type === "attempt_failed")).toBe(true);
    for (const e of changes) expect(["attempt", "step.event"]).toContain(e.event);
    const charge = changes.filter((e) => e.event === "attempt" && e.data.vertexId === "charge");
    expect(charge.map((e) => e.data.outcome)).toEqual(["retried", "retried", "failed"]);
    expect(charge[0]!.data).toMatchObject({ epoch: 1, attempt: 1 });
    for (let i = 1; i < changes.length; i++) expect(before(changes[i - 1]!.id!, changes[i]!.id!)).toBe(true);
    // A second connection: the same ids for the same changes.
    const again = await route(h, id, { query: "" });
    expect(again.events).toEqual(all);
    // Cut at every id: the prefix + the resumed stream = the whole, nothing repeated.
    for (let cut = 0; cut < all.length; cut++) {
      const resumed = await route(h, id, cut % 2 === 0 ? { lastEventId: all[cut]!.id! } : { query: `?lastEventId=${all[cut]!.id!}` });
      const union = [...all.slice(0, cut + 1).filter((e) => e.event !== "execution.finished"), ...resumed.events];
      expect(union).toEqual(all);
    }
  });

  it("delivers a live execution's changes as its steps settle, each attempt once in its latest state", async () => {
    const h = harness();
    const wf = await seedWorkflow("dev", chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 5 } });
    const reading = stream(env.DB, id, "", { pollMs: 5, maxPolls: 10_000, maxMs: 20_000 });
    await new Promise((r) => setTimeout(r, 30));
    h.dest.fault("/payments/charges", 500, 1);
    await h.drain();
    const events = await reading;
    expect(events.at(-1)).toMatchObject({ event: "execution.finished", data: { status: "COMPLETED" } });
    const attempts = events.filter((e) => e.event === "attempt");
    // Each (vertex, epoch) ends in its final state; an earlier event of it may show it running.
    const final = new Map(attempts.map((e) => [`${e.data.vertexId as string}/${e.data.epoch as number}`, e.data.outcome]));
    expect(final.get("charge/1")).toBe("retried");
    expect(final.get("charge/2")).toBe("completed");
    expect(final.get("done/1")).toBe("completed");
    const ids = events.slice(0, -1).map((e) => e.id!);
    expect(new Set(ids).size).toBe(ids.length);
    // What a new connection sees now is the compacted view: every attempt once, finished.
    const later = await stream(env.DB, id);
    const laterAttempts = later.filter((e) => e.event === "attempt");
    expect(laterAttempts.map((e) => e.data.outcome).sort()).toEqual(["completed", "completed", "retried"]);
  });

  it("ends with stream.end after its poll budget while the execution runs, one batch round trip per poll", async () => {
    const h = harness();
    const wf = await seedWorkflow("dev", chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 5 } });
    const counting = countingD1(env.DB);
    const events = await stream(counting.db, id, "", { maxPolls: 7 });
    expect(events.at(-1)).toMatchObject({ event: "stream.end", data: { reason: "budget" } });
    expect(events.at(-1)!.id).toBeUndefined();
    expect(counting.roundTrips()).toBe(7);
    expect(counting.calls.every((c) => c.kind === "batch" && c.sql.length === 3)).toBe(true);
    // The default bound: at most MAX_POLLS round trips (300 statements) per connection.
    const defaults = countingD1(env.DB);
    const timed = await stream(defaults.db, id, "", { pollMs: 0, maxMs: 60_000 });
    expect(timed.at(-1)!.event).toBe("stream.end");
    expect(defaults.roundTrips()).toBe(100);
    expect(defaults.statements()).toBe(300);
  });

  it("numbers every attempt a cancel ends apart (one statement, several rows)", async () => {
    const h = harness();
    const wf = await seedWorkflow("dev", chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 5 } });
    await env.DB.batch(
      ["a", "b", "c"].map((v, i) =>
        env.DB.prepare(
          `INSERT INTO step_attempt_rows (execution_id, vertex_id, epoch, attempt, outcome, started_at, seq, ev_mark)
           VALUES (?1, ?2, 1, 1, 'running', 1, ?3, 0)`,
        ).bind(id, v, i + 1),
      ),
    );
    const result = await cancelExecution(env.DB, "dev", id, h.clock.now());
    expect(result.cancelled).toBe(true);
    const rows = await env.DB.prepare(`SELECT seq FROM step_attempts WHERE execution_id = ?1 ORDER BY seq`).bind(id).all<{ seq: number }>();
    const seqs = rows.results.map((r) => r.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(Math.min(...seqs)).toBeGreaterThan(3);
    const events = await stream(env.DB, id, "0.3");
    expect(events.filter((e) => e.event === "attempt").map((e) => e.data.outcome)).toEqual(["cancelled", "cancelled", "cancelled"]);
    expect(events.at(-1)).toMatchObject({ event: "execution.finished", data: { status: "CANCELLED" } });
  });

  it("streams 200 steps and 1,000 step events in order, in bounded polls, and resumes at a middle id", async () => {
    const h = harness();
    const wf = await seedWorkflow("dev", chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 5 } });
    // Rows as the step paths write them: per step, five events, then its attempt (mark = the newest event).
    const statements: D1PreparedStatement[] = [];
    for (let s = 0; s < 200; s++) {
      for (let k = 0; k < 5; k++) {
        statements.push(
          env.DB.prepare(
            `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at) VALUES (?1, ?2, 'redelivery_dropped', 1, ?3)`,
          ).bind(id, `v${s}`, s * 10 + k),
        );
      }
      statements.push(
        env.DB.prepare(
          `INSERT INTO step_attempt_rows (execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, seq, ev_mark)
           VALUES (?1, ?2, 1, 1, 'completed', ?3, ?3,
                   (SELECT coalesce(max(seq), 0) + 1 FROM step_attempts WHERE execution_id = ?1),
                   (SELECT coalesce(max(id), 0) FROM step_events WHERE execution_id = ?1))`,
        ).bind(id, `v${s}`, s * 10 + 5),
      );
    }
    for (let i = 0; i < statements.length; i += 100) await env.DB.batch(statements.slice(i, i + 100));
    await env.DB.prepare(`UPDATE executions SET status = 'COMPLETED', finished_at = 1, updated_at = 1 WHERE id = ?1`).bind(id).run();
    const counting = countingD1(env.DB);
    const started = Date.now();
    const all = await stream(counting.db, id);
    const elapsed = Date.now() - started;
    console.log(`1,200 changes streamed in ${elapsed} ms, ${counting.roundTrips()} round trips`);
    expect(all.at(-1)!.event).toBe("execution.finished");
    const changes = all.slice(0, -1);
    expect(changes.length).toBe(1200);
    expect(counting.roundTrips()).toBeLessThanOrEqual(8);
    for (let i = 1; i < changes.length; i++) expect(before(changes[i - 1]!.id!, changes[i]!.id!)).toBe(true);
    // The order is the write order: five step events of a step, then its attempt.
    expect(changes.slice(0, 6).map((e) => e.event)).toEqual([
      "step.event",
      "step.event",
      "step.event",
      "step.event",
      "step.event",
      "attempt",
    ]);
    expect(changes.filter((e) => e.event === "attempt").map((e) => e.data.vertexId)).toEqual(
      Array.from({ length: 200 }, (_, s) => `v${s}`),
    );
    for (const cut of [599, 600, 601, 1000]) {
      const resumed = await stream(env.DB, id, changes[cut]!.id!);
      expect([...changes.slice(0, cut + 1), ...resumed]).toEqual(all);
    }
  });
});
