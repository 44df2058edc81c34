/**
 * No execution ever touches two databases (SPEC section 13). A workspace on each shard lives a whole
 * execution life through the Worker's real entry points — the HTTP app, the queue handler, the cron
 * runner — with a counting wrapper on each shard's database: its workflows saved, triggered, its
 * steps run and failed, a step retried, an execution started over, one cancelled, and one whose
 * message was lost recovered by the reaper. Every statement of that life goes to its own shard; the
 * other shard sees only the placement fence's one-time statements, and holds none of its rows.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { PERIODIC_TASKS } from "../../src/scheduled";
import { runOnEveryShard } from "../../src/shards/cron";
import { countingD1, type CountingD1 } from "../helpers/counting-d1";
import { placedWorkspace } from "../helpers/placed-workspace";
import { deliveredEnv } from "../helpers/shards";

beforeEach(() => {
  for (const level of ["log", "warn", "error"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

/** The fence's statements: the only ones a workspace ever sends to a shard other than its own, once per isolate. */
const FENCE = /workspace_placements|d1_migrations|SELECT EXISTS \(SELECT 1 FROM workflows/;

/** Every row of every table of `db` except the placements record, as one string. */
async function dump(db: D1Database): Promise<string> {
  const { results } = await db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'")
    .all<{ name: string }>();
  let text = "";
  for (const { name } of results) {
    if (name === "workspace_placements" || name === "d1_migrations") continue;
    text += JSON.stringify((await db.prepare(`SELECT * FROM "${name}"`).all()).results);
  }
  return text;
}

const WORKFLOWS = {
  ok: {
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: {} },
      { id: "shape", type: "TRANSFORM", config: { output: { seen: "= payload.n" } } },
      { id: "done", type: "TRANSFORM", config: { output: { total: "= steps.shape.output.seen" } } },
    ],
    edges: [
      { from: "entry", to: "shape" },
      { from: "shape", to: "done" },
    ],
  },
  fail: {
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: {} },
      { id: "boom", type: "TRANSFORM", config: { output: { never: "= $error('told to fail')" } } },
    ],
    edges: [{ from: "entry", to: "boom" }],
  },
};

/** A workspace on shard `own` of two, with each shard's database counted. */
function world(own: 0 | 1) {
  const real = deliveredEnv(env);
  const counted: [CountingD1, CountingD1] = [countingD1(real.DB), countingD1(real.DB_1)];
  const w = placedWorkspace("iso", own, { databases: [counted[0].db, counted[1].db] });
  return { ...w, own, other: own === 0 ? 1 : 0, counted };
}

async function status(w: ReturnType<typeof world>, id: string): Promise<string> {
  const res = await w.call("GET", `/v1/executions/${id}`);
  expect(res.status).toBe(200);
  return (await res.json<{ status: string }>()).status;
}

describe.each([0, 1] as const)("a workspace on shard %i", (own) => {
  it("lives a whole execution life on its shard: nothing of it on the other, no statement but the fence's", async () => {
    const w = world(own);
    const elsewhere = w.counted[w.other]!;
    const mine = w.counted[w.own];

    // Saved (the first request records the placement: the fence's one-time statements).
    for (const [id, definition] of Object.entries(WORKFLOWS)) {
      expect((await w.call("PUT", `/v1/workflows/${id}`, { id, ...definition })).status).toBe(201);
    }
    expect(elsewhere.calls.flatMap((c) => c.sql).every((sql) => FENCE.test(sql))).toBe(true);
    elsewhere.reset();
    mine.reset();

    // Triggered and run to completion; a duplicate trigger deduplicated.
    const ok = await w.call("POST", "/v1/workflows/ok/trigger", { n: 1 });
    expect(ok.status).toBe(202);
    const okId = (await ok.json<{ executionId: string }>()).executionId;
    expect((await w.call("POST", "/v1/workflows/ok/trigger", { n: 1 })).status).toBe(200);
    expect(w.sent.every((m) => (m as { shard?: number }).shard === own)).toBe(true);
    await w.deliverAll();
    expect(await status(w, okId)).toBe("COMPLETED");

    // A step fails; an operator retries it (it fails again); the execution is started over.
    const fail = await w.call("POST", "/v1/workflows/fail/trigger", { n: 2 });
    const failId = (await fail.json<{ executionId: string }>()).executionId;
    await w.deliverAll();
    expect(await status(w, failId)).toBe("FAILED");
    expect((await w.call("POST", `/v1/executions/${failId}/steps/boom/retry`, {}, { key: true })).status).toBe(202);
    await w.deliverAll();
    expect(await status(w, failId)).toBe("FAILED");
    const over = await w.call("POST", `/v1/executions/${failId}/start-over`, {}, { key: true });
    expect(over.status).toBe(202);
    const overId = (await over.json<{ executionId: string }>()).executionId;
    await w.deliverAll();
    expect(await status(w, overId)).toBe("FAILED");

    // One is cancelled before its steps run.
    const doomed = await w.call("POST", "/v1/workflows/ok/trigger", { n: 3 });
    const doomedId = (await doomed.json<{ executionId: string }>()).executionId;
    expect((await w.call("POST", `/v1/executions/${doomedId}/cancel`, {}, { key: true })).status).toBe(200);
    await w.deliverAll();
    expect(await status(w, doomedId)).toBe("CANCELLED");

    // One's message is lost; the reaper of a cron tick (every shard in turn) re-sends it, to its shard.
    const lost = await w.call("POST", "/v1/workflows/ok/trigger", { n: 4 });
    const lostId = (await lost.json<{ executionId: string }>()).executionId;
    w.sent.length = 0;
    expect(elsewhere.statements()).toBe(0);
    const ctx = createExecutionContext();
    await runOnEveryShard(PERIODIC_TASKS, w.env, { cron: "* * * * *", scheduledTime: Date.now() + 10 * 60_000 }, ctx);
    await waitOnExecutionContext(ctx);
    expect(w.sent).toContainEqual({ executionId: lostId, vertexId: "shape", shard: own });
    await w.deliverAll();
    expect(await status(w, lostId)).toBe("COMPLETED");

    // Everything of the workspace is on its shard; the other holds nothing of it.
    const theirs = await dump(own === 0 ? deliveredEnv(env).DB_1 : deliveredEnv(env).DB);
    for (const id of [w.workspace, okId, failId, overId, doomedId, lostId]) expect(theirs).not.toContain(id);
    const ours = await dump(own === 0 ? deliveredEnv(env).DB : deliveredEnv(env).DB_1);
    for (const id of [okId, failId, overId, doomedId, lostId]) expect(ours).toContain(id);
    expect(mine.statements()).toBeGreaterThan(20);
  });
});
