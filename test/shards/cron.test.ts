/**
 * Cron over shards (src/shards/cron.ts): every task runs on every shard in turn, on that shard's
 * database, within one allocator: each shard's history sweep gets an equal share of the tick's
 * queries, so one busy shard cannot starve another's reaper, and the tick stays under D1's 1,000.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { WorkflowDefinition } from "../../src/definitions/schema";
import { saveWorkflow } from "../../src/definitions/store";
import { historyTask } from "../../src/history/cron";
import { ingressTask } from "../../src/ingress/cron";
import { fireSchedules } from "../../src/ingress/schedule";
import type { StepMessage } from "../../src/steps/messages";
import type { PeriodicTask, Tick } from "../../src/lib/periodic-task";
import { auditShard, placementAuditTask } from "../../src/shards/audit";
import { MAX_SHARDS } from "../../src/shards/config";
import { BOUNDED_TASK_QUERIES, CRON_QUERY_BUDGET, runOnEveryShard, sweepShare } from "../../src/shards/cron";
import { forgetPlacements } from "../../src/shards/placement";
import { forgetSchemaChecks, LATEST_MIGRATION } from "../../src/shards/schema";
import { shardEnv, shardOfEnv } from "../../src/shards/shard-env";
import { reaperTask } from "../../src/steps/cron";
import { countingD1 } from "../helpers/counting-d1";
import { captureLogLines } from "../helpers/log-lines";
import { ONE_STEP, placedWorkspace } from "../helpers/placed-workspace";
import { deliveredEnv } from "../helpers/shards";
import { finishedExecutions } from "../history/helpers";

const lines = captureLogLines();
afterEach(() => vi.restoreAllMocks());

const real = deliveredEnv(env);
const TICK: Tick = { cron: "* * * * *", scheduledTime: Date.now() };

/** A task that records each run: the shard of its env, which database it reached, and the tick it got. */
function recordingTask(runs: Array<{ shard: number; marker: string | null; tick: Tick }>): PeriodicTask<null> {
  return {
    name: "recording",
    async run(e, tick) {
      const marker = await e.DB.prepare("SELECT value FROM shard_marker").first<string>("value");
      runs.push({ shard: shardOfEnv(e), marker, tick });
      return null;
    },
    logLine: () => null,
  };
}

describe("the cron allocator", () => {
  it("gives each shard's history sweep an equal share of the tick, the rest kept for the bounded tasks", () => {
    expect(CRON_QUERY_BUDGET).toBeLessThan(1000);
    expect(sweepShare(1)).toBe(CRON_QUERY_BUDGET - BOUNDED_TASK_QUERIES);
    expect(sweepShare(2)).toBe(CRON_QUERY_BUDGET / 2 - BOUNDED_TASK_QUERIES);
    // Too many shards for a useful share: the sweep moves to its own queue invocation (0).
    expect(sweepShare(MAX_SHARDS)).toBe(0);
    // The most shards a deployment binds all fit one tick's bounded tasks.
    expect(MAX_SHARDS * BOUNDED_TASK_QUERIES).toBeLessThanOrEqual(CRON_QUERY_BUDGET);
    for (let shards = 1; shards <= MAX_SHARDS; shards++) {
      expect(shards * (sweepShare(shards) + BOUNDED_TASK_QUERIES)).toBeLessThanOrEqual(CRON_QUERY_BUDGET);
    }
  });

  it("runs every task on every shard in shard order, on that shard's database, with the shard, the shard count and its share", async () => {
    for (const [db, value] of [
      [real.DB, "zero"],
      [real.DB_1, "one"],
    ] as const) {
      await db.prepare("CREATE TABLE IF NOT EXISTS shard_marker (value TEXT)").run();
      await db.prepare("DELETE FROM shard_marker").run();
      await db.prepare("INSERT INTO shard_marker (value) VALUES (?1)").bind(value).run();
    }
    const runs: Array<{ shard: number; marker: string | null; tick: Tick }> = [];
    await runOnEveryShard([recordingTask(runs)], real, TICK, createExecutionContext());
    expect(runs.map((r) => [r.shard, r.marker])).toEqual([
      [0, "zero"],
      [1, "one"],
    ]);
    expect(runs.map((r) => r.tick)).toEqual([
      { ...TICK, shard: 0, shards: 2, sweepQueries: sweepShare(2), scheduleRefusal: expect.any(Function) },
      { ...TICK, shard: 1, shards: 2, sweepQueries: sweepShare(2), scheduleRefusal: expect.any(Function) },
    ]);
    // The map decides, per shard, which workspaces' schedules fire there.
    const far = `far-${crypto.randomUUID().slice(0, 8)}`;
    const near = `near-${crypto.randomUUID().slice(0, 8)}`;
    const e = { ...real, WORKSPACE_SHARDS: `${far}:1` } as unknown as Env;
    const placed: Array<[number, boolean, boolean]> = [];
    const probe: PeriodicTask<null> = {
      name: "probe",
      run: async (_e, tick) => (
        placed.push([tick.shard!, (await tick.scheduleRefusal!(far)) === null, (await tick.scheduleRefusal!(near)) === null]),
        null
      ),
      logLine: () => null,
    };
    await runOnEveryShard([probe], e, TICK, createExecutionContext());
    expect(placed).toEqual([
      [0, false, true],
      [1, true, false],
    ]);
  });

  it("a frozen workspace (the map moved it, its placement record did not) starts no schedule on the shard the map names", async () => {
    // A cron both of whose day fields are set: every delivery is the minute it falls in (src/ingress/tick.ts).
    // acme runs on shard 0; the operator froze it for a move (map: shard 1) and copied its workflow there.
    const ws = `frozen-${crypto.randomUUID().slice(0, 8)}`;
    const id = `sched-${crypto.randomUUID().slice(0, 8)}`;
    const definition = WorkflowDefinition.parse({
      id,
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: { schedule: "30 6 1 1 MON" } },
        { id: "shape", type: "TRANSFORM", config: { output: "= payload" } },
      ],
      edges: [{ from: "entry", to: "shape" }],
    });
    await real.DB.prepare("INSERT INTO workspace_placements (workspace, shard, placed_at) VALUES (?1, 0, ?2)").bind(ws, Date.now()).run();
    for (const db of [real.DB, real.DB_1]) await saveWorkflow(db, ws, definition, Date.now());
    forgetPlacements();
    const sent: unknown[] = [];
    const e = {
      ...real,
      D1_SHARDS: "DB,DB_1",
      WORKSPACE_SHARDS: `${ws}:1`,
      QUEUE: { send: async (body: unknown) => void sent.push(body), sendBatch: async () => {} },
    } as unknown as Env;
    const ctx = createExecutionContext();
    await runOnEveryShard([ingressTask], e, { cron: "30 6 1 1 MON", scheduledTime: Date.now() - 120_000 }, ctx);
    await waitOnExecutionContext(ctx);
    const runs = async (db: D1Database) =>
      (
        await db
          .prepare("SELECT status, error FROM schedule_runs WHERE workspace = ?1 AND workflow_id = ?2")
          .bind(ws, id)
          .all<{ status: string; error: string }>()
      ).results;
    // Shard 1 (the map's): fenced, skipped with the reason; shard 0 (the record's): placed elsewhere, skipped.
    expect(await runs(real.DB_1)).toEqual([{ status: "SKIPPED", error: expect.stringMatching(/is fenced: .*recorded on shard 0/) }]);
    expect(await runs(real.DB)).toEqual([{ status: "SKIPPED", error: expect.stringMatching(/placed on another shard/) }]);
    for (const db of [real.DB, real.DB_1]) {
      expect(await db.prepare("SELECT count(*) AS n FROM executions WHERE workspace = ?1").bind(ws).first("n")).toBe(0);
    }
    // The move recorded: the next tick starts it on shard 1, and only there.
    await real.DB.prepare("UPDATE workspace_placements SET shard = 1 WHERE workspace = ?1").bind(ws).run();
    forgetPlacements();
    await runOnEveryShard([ingressTask], e, { cron: "30 6 1 1 MON", scheduledTime: Date.now() - 60_000 }, createExecutionContext());
    expect(await real.DB_1.prepare("SELECT count(*) AS n FROM executions WHERE workspace = ?1").bind(ws).first("n")).toBe(1);
    expect(await real.DB.prepare("SELECT count(*) AS n FROM executions WHERE workspace = ?1").bind(ws).first("n")).toBe(0);
  });

  it("a schedule of a workspace the map places on another shard is skipped with the reason, never started here", async () => {
    const id = `sched-${crypto.randomUUID().slice(0, 8)}`;
    const definition = WorkflowDefinition.parse({
      id,
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: { schedule: "0 9 * * *" } },
        { id: "shape", type: "TRANSFORM", config: { output: "= payload" } },
      ],
      edges: [{ from: "entry", to: "shape" }],
    });
    await saveWorkflow(env.DB, "moving", definition, Date.now());
    const queue = { sendBatch: async () => {}, send: async () => {} } as unknown as Queue<StepMessage>;
    const report = await fireSchedules({ db: env.DB, queue, now: () => Date.now() }, "0 9 * * *", Date.UTC(2026, 11, 6, 9, 0), {
      scheduleRefusal: async (workspace) =>
        workspace === "moving" ? 'workspace "moving" is placed on another shard (WORKSPACE_SHARDS)' : null,
    });
    expect(report.started).toEqual([]);
    expect(report.skipped).toBeGreaterThanOrEqual(1);
    const run = await env.DB.prepare("SELECT status, error FROM schedule_runs WHERE workflow_id = ?1")
      .bind(id)
      .first<{ status: string; error: string }>();
    expect(run).toEqual({ status: "SKIPPED", error: 'workspace "moving" is placed on another shard (WORKSPACE_SHARDS)' });
    expect(await env.DB.prepare("SELECT count(*) AS n FROM executions WHERE workflow_id = ?1").bind(id).first("n")).toBe(0);
  });

  it("skips a shard whose schema is behind (logged), and still runs the others", async () => {
    const latest = await real.DB.prepare("SELECT id, name, applied_at FROM d1_migrations WHERE name = ?1")
      .bind(LATEST_MIGRATION)
      .first<{ id: number; name: string; applied_at: string }>();
    await real.DB.prepare("DELETE FROM d1_migrations WHERE name = ?1").bind(LATEST_MIGRATION).run();
    forgetSchemaChecks();
    const runs: Array<{ shard: number; marker: string | null; tick: Tick }> = [];
    try {
      await runOnEveryShard([recordingTask(runs)], real, TICK, createExecutionContext());
    } finally {
      await real.DB.prepare("INSERT INTO d1_migrations (id, name, applied_at) VALUES (?1, ?2, ?3)")
        .bind(latest!.id, latest!.name, latest!.applied_at)
        .run();
      forgetSchemaChecks();
    }
    expect(runs.map((r) => r.shard)).toEqual([1]);
    expect(lines).toContainEqual(expect.objectContaining({ event: "cron.shard_skipped", shard: 0 }));
  });

  it("a greedy shard cannot starve the next one's reaper, and the tick stays within its budget over both shards", async () => {
    // A step on shard 1 whose message was lost.
    const counted = [countingD1(real.DB), countingD1(real.DB_1)] as const;
    const w = placedWorkspace("cron", 1, { databases: [counted[0].db, counted[1].db] });
    expect((await w.call("PUT", "/v1/workflows/wf", { id: "wf", ...ONE_STEP })).status).toBe(201);
    const lost = (await (await w.call("POST", "/v1/workflows/wf/trigger", { n: 1 })).json<{ executionId: string }>()).executionId;
    w.sent.length = 0;
    counted[0].reset();
    counted[1].reset();

    // Shard 0's "sweep" spends every query the allocator gives it, and more if it could.
    const greedy: PeriodicTask<null> = {
      name: "greedy",
      async run(shard, tick) {
        if (shardOfEnv(shard) !== 0) return null;
        for (let i = 0; i < (tick.sweepQueries ?? 10_000); i++) await shard.DB.prepare("SELECT 1").first();
        return null;
      },
      logLine: () => null,
    };
    const ctx = createExecutionContext();
    await runOnEveryShard([greedy, reaperTask], w.env, { cron: "* * * * *", scheduledTime: Date.now() + 10 * 60_000 }, ctx);
    await waitOnExecutionContext(ctx);
    expect(w.sent).toContainEqual({ executionId: lost, vertexId: "shape", shard: 1 });
    expect(counted[0].statements() + counted[1].statements()).toBeLessThanOrEqual(CRON_QUERY_BUDGET);
  });
});

describe("the history sweep under the allocator", () => {
  it("honours its share: a share too small for one pass removes nothing (the next tick or a continuation goes on)", async () => {
    const { ids, dueAt } = await finishedExecutions("cron-share", 2);
    // The history harness runs on the test's `env.DB`: shard 1's database in project shard-1.
    const shard = env.TEST_SHARD_0 ? 1 : 0;
    const tick = { cron: "* * * * *", scheduledTime: dueAt, shard };
    const left = async () =>
      env.DB.prepare("SELECT count(*) AS n FROM executions WHERE id IN (SELECT value FROM json_each(?1))")
        .bind(JSON.stringify(ids))
        .first("n");
    const starved = await historyTask.run(shardEnv(real, shard), { ...tick, sweepQueries: 1 }, createExecutionContext());
    expect(starved).toMatchObject({ removed: 0, drained: false });
    expect(await left()).toBe(2);
    const fed = await historyTask.run(shardEnv(real, shard), { ...tick, sweepQueries: sweepShare(2) }, createExecutionContext());
    expect(fed.removed).toBe(2);
    expect(await left()).toBe(0);
  });

  it("a share of 0 (too many shards) hands the sweep to its own queue invocation, on its shard", async () => {
    const sent: unknown[] = [];
    const e = { ...real, QUEUE: { send: async (body: unknown) => void sent.push(body) } } as unknown as Env;
    const report = await historyTask.run(shardEnv(e, 1), { ...TICK, shard: 1, sweepQueries: 0 }, createExecutionContext());
    expect(report).toMatchObject({ skipped: true, continued: true, removed: 0 });
    expect(sent).toEqual([{ sweep: "history", shard: 1 }]);
  });
});

describe("the placement audit", () => {
  it("logs the workspaces with rows on a shard the map does not place them on, hourly", async () => {
    await real.DB_1.prepare(
      "INSERT INTO workspace_secrets (workspace, name, key_id, iv, ciphertext, created_at, updated_at) " +
        "VALUES ('stray', 'K', 'k', 'iv', 'c', 1, 1)",
    ).run();
    const e = { ...real, WORKSPACE_SHARDS: "other:1" } as unknown as Env;
    expect((await auditShard(shardEnv(e, 1), 1)).misplaced).toContainEqual({ workspace: "stray", placedOn: 0 });
    const onTheHour = { cron: "* * * * *", scheduledTime: Date.UTC(2026, 11, 6, 3, 0), shard: 1 };
    const report = await placementAuditTask.run(shardEnv(e, 1), onTheHour, createExecutionContext());
    expect(placementAuditTask.logLine(report)).toMatchObject({ level: "error", event: "shards.rows_misplaced" });
    expect(
      await placementAuditTask.run(
        shardEnv(e, 1),
        { ...onTheHour, scheduledTime: onTheHour.scheduledTime + 60_000 },
        createExecutionContext(),
      ),
    ).toBeNull();
    expect(await placementAuditTask.run(shardEnv(e, 1), { ...onTheHour, cron: "0 * * * *" }, createExecutionContext())).toBeNull();
  });
});
