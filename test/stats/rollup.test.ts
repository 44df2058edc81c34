/**
 * The hourly rollup (SPEC section 15; migrations/0022, src/ledger/stats-rollup.ts,
 * src/stats/rollup-task.ts): a closed hour is rolled once its pass is due, the same roll twice is
 * the same row, the settled and final passes take in late changes and nothing after them, a
 * removal never lowers a figure, the rows outlive the executions and go after 400 days, each
 * workspace's rows are its own and live on its shard, and a tick stays within its statements.
 */
import { createExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { removeExecutions, rollHours, startRollupTick, STATS_RETENTION_MS } from "../../src/ledger";
import { PERIODIC_TASKS } from "../../src/scheduled";
import { runOnEveryShard } from "../../src/shards/cron";
import { shardEnv } from "../../src/shards/shard-env";
import { BACKFILL_HOURS, MAX_HOURS_PER_ROLL } from "../../src/stats/rollup-plan";
import { ROLLUP_SWEEP_LIMIT, ROLLUP_TASK_QUERIES, rollupLogLine, runRollup, statsRollupTask } from "../../src/stats/rollup-task";
import { countingD1 } from "../helpers/counting-d1";
import { createdIn, HOUR_MS, marksOf, MINUTE_MS, real, rollupRows, row, setMarks, shardDb, statsWorkspace, trigger } from "./helpers";

/** Distinct hours per test (the file shares one database per shard): 2026-11-0N 10:00 UTC. */
const hourOn = (day: number) => Date.UTC(2026, 10, day, 10);

describe("rolling a closed hour", () => {
  it("rolls the hour 5 minutes after it ends, per workflow and for the workspace, and rolling it again gives the same rows", async () => {
    const T = hourOn(1);
    const w = await statsWorkspace("roll", 0, ["wf", "constructor"]);
    const first = await trigger(w, "wf", { n: 1 });
    expect(await trigger(w, "wf", { n: 1 })).toBe(first); // a duplicate trigger
    await trigger(w, "wf", { n: 2 });
    await trigger(w, "constructor", { n: 3 });
    await createdIn(w, T);
    await setMarks(real.DB, T);

    // 4 minutes after the hour: not due yet.
    expect((await runRollup(real.DB, T + HOUR_MS + 4 * MINUTE_MS)).rolled).toEqual([]);
    expect(await rollupRows(real.DB, w.workspace)).toEqual([]);

    const due = T + HOUR_MS + 5 * MINUTE_MS;
    const report = await runRollup(real.DB, due);
    expect(report.rolled).toEqual([{ from: T, to: T + HOUR_MS }]);
    const rows = await rollupRows(real.DB, w.workspace);
    expect(rows).toEqual([
      row("", T, { executions: 3, duplicate_triggers: 1, running: 3 }),
      row("constructor", T, { executions: 1, running: 1 }),
      row("wf", T, { executions: 2, duplicate_triggers: 1, running: 2 }),
    ]);
    expect(await marksOf(real.DB)).toEqual({ closed: T + HOUR_MS, settled: T, final: T });

    // The same hour rolled again (the statement itself, and a second tick at the same time): the same rows.
    await rollHours(real.DB, [{ from: T, to: T + HOUR_MS }], [], due + MINUTE_MS);
    await runRollup(real.DB, due);
    expect(await rollupRows(real.DB, w.workspace)).toEqual(rows);
    expect(rollupLogLine(report)).toMatchObject({ level: "info", event: "stats.rolled", fields: { shard: 0, rows: expect.any(Number) } });
  });

  it("two ticks at once roll the same hours and the marks keep the furthest", async () => {
    const T = hourOn(2);
    const w = await statsWorkspace("race");
    await trigger(w, "wf", { n: 1 });
    await createdIn(w, T);
    await setMarks(real.DB, T);
    const at = T + HOUR_MS + 5 * MINUTE_MS;
    await Promise.all([runRollup(real.DB, at), runRollup(real.DB, at)]);
    expect(await rollupRows(real.DB, w.workspace)).toEqual([
      row("", T, { executions: 1, running: 1 }),
      row("wf", T, { executions: 1, running: 1 }),
    ]);
    // A tick replayed with an older time moves no mark back.
    await runRollup(real.DB, T - 3 * HOUR_MS);
    expect((await marksOf(real.DB)).closed).toBe(T + HOUR_MS);
  });
});

describe("late changes", () => {
  it("the settled (65 min) and final (24 h 5 min) passes re-roll the hour; a change after the final pass is not counted", async () => {
    const T = hourOn(3);
    const w = await statsWorkspace("late");
    const a = await trigger(w, "wf", { n: 1 });
    await trigger(w, "wf", { n: 2 });
    await createdIn(w, T);
    await setMarks(real.DB, T);
    await runRollup(real.DB, T + HOUR_MS + 5 * MINUTE_MS);
    expect((await rollupRows(real.DB, w.workspace)).find((r) => r.workflow_id === "wf")).toEqual(
      row("wf", T, { executions: 2, running: 2 }),
    );

    // After the closed pass: both executions run to the end, one more duplicate trigger, a redelivery stopped.
    await w.deliverAll();
    await trigger(w, "wf", { n: 1 });
    await real.DB.prepare("UPDATE executions SET redeliveries_stopped = 1 WHERE id = ?1").bind(a).run();
    const settledRow = row("wf", T, { executions: 2, duplicate_triggers: 1, redeliveries_stopped: 1, completed: 2 });

    // Not yet: the settled pass is due 65 minutes after the hour ends.
    await runRollup(real.DB, T + 2 * HOUR_MS + 4 * MINUTE_MS);
    expect((await rollupRows(real.DB, w.workspace)).find((r) => r.workflow_id === "wf")).toEqual(
      row("wf", T, { executions: 2, running: 2 }),
    );
    await runRollup(real.DB, T + 2 * HOUR_MS + 5 * MINUTE_MS);
    expect((await rollupRows(real.DB, w.workspace)).find((r) => r.workflow_id === "wf")).toEqual(settledRow);

    // A duplicate within the day: the final pass counts it.
    await real.DB.prepare("UPDATE executions SET duplicate_deliveries = duplicate_deliveries + 2 WHERE id = ?1").bind(a).run();
    await setMarks(real.DB, null);
    await real.DB.prepare("INSERT INTO stats_rollup_marks (pass, next_hour) VALUES ('closed', ?1), ('settled', ?1), ('final', ?2)")
      .bind(T + 25 * HOUR_MS, T)
      .run();
    await runRollup(real.DB, T + 25 * HOUR_MS + 4 * MINUTE_MS);
    expect((await rollupRows(real.DB, w.workspace)).find((r) => r.workflow_id === "wf")?.duplicate_triggers).toBe(1);
    await runRollup(real.DB, T + 25 * HOUR_MS + 5 * MINUTE_MS);
    const finalRow = { ...settledRow, duplicate_triggers: 3 };
    expect((await rollupRows(real.DB, w.workspace)).find((r) => r.workflow_id === "wf")).toEqual(finalRow);

    // After the final pass no tick rolls the hour again: a later duplicate stays out of the hour's row.
    await real.DB.prepare("UPDATE executions SET duplicate_deliveries = duplicate_deliveries + 5 WHERE id = ?1").bind(a).run();
    await runRollup(real.DB, T + 30 * HOUR_MS);
    expect((await rollupRows(real.DB, w.workspace)).find((r) => r.workflow_id === "wf")).toEqual(finalRow);
  });

  it("a re-roll after the history sweep removed some of the hour's executions never lowers a figure: the rows outlive them", async () => {
    const T = hourOn(4);
    const w = await statsWorkspace("removed");
    const a = await trigger(w, "wf", { n: 1 });
    await trigger(w, "wf", { n: 1 });
    await trigger(w, "wf", { n: 2 });
    await w.deliverAll();
    await createdIn(w, T);
    await setMarks(real.DB, T);
    await runRollup(real.DB, T + HOUR_MS + 5 * MINUTE_MS);
    const before = row("wf", T, { executions: 2, duplicate_triggers: 1, completed: 2 });
    expect((await rollupRows(real.DB, w.workspace)).find((r) => r.workflow_id === "wf")).toEqual(before);

    // The execution that stopped the duplicate goes (an erasure: the sweep's removal batch, without its wait).
    expect((await removeExecutions(real.DB, [a], Date.now(), "erased")).executions).toBe(1);
    // Its re-roll sees one execution: the row keeps both, and the duplicate.
    await runRollup(real.DB, T + 2 * HOUR_MS + 5 * MINUTE_MS);
    expect((await rollupRows(real.DB, w.workspace)).find((r) => r.workflow_id === "wf")).toEqual(before);
    // Every execution gone: the rows stay as they were.
    await real.DB.prepare("DELETE FROM steps WHERE workspace = ?1").bind(w.workspace).run();
    await real.DB.prepare("DELETE FROM executions WHERE workspace = ?1").bind(w.workspace).run();
    await runRollup(real.DB, T + 25 * HOUR_MS + 5 * MINUTE_MS);
    expect((await rollupRows(real.DB, w.workspace)).find((r) => r.workflow_id === "wf")).toEqual(before);
  });
});

describe("events in the workspace's row", () => {
  it("the events the workspace received in the hour, and their duplicates, count in its row ('') only", async () => {
    const T = hourOn(5);
    const w = await statsWorkspace("events");
    const send = async (id: string) =>
      expect((await w.call("POST", "/v1/events", { name: "payment.confirmed", match: "A-1", id })).status).toBeLessThan(300);
    await send("evt-1");
    await send("evt-1");
    await send("evt-1");
    await send("evt-2");
    await real.DB.prepare("UPDATE events SET received_at = ?2 WHERE workspace = ?1")
      .bind(w.workspace, T + 10 * MINUTE_MS)
      .run();
    await setMarks(real.DB, T);
    await runRollup(real.DB, T + HOUR_MS + 5 * MINUTE_MS);
    expect(await rollupRows(real.DB, w.workspace)).toEqual([row("", T, { events_received: 2, duplicate_events: 2 })]);
  });
});

describe("workspaces and shards", () => {
  it("another workspace's numbers are never mixed in, even with the same workflow id in the same hour", async () => {
    const T = hourOn(6);
    const a = await statsWorkspace("mine");
    const b = await statsWorkspace("theirs");
    await trigger(a, "wf", { n: 1 });
    for (let n = 0; n < 3; n++) await trigger(b, "wf", { n });
    await createdIn(a, T);
    await createdIn(b, T);
    await setMarks(real.DB, T);
    await runRollup(real.DB, T + HOUR_MS + 5 * MINUTE_MS);
    expect((await rollupRows(real.DB, a.workspace)).map((r) => [r.workflow_id, r.executions])).toEqual([
      ["", 1],
      ["wf", 1],
    ]);
    expect((await rollupRows(real.DB, b.workspace)).map((r) => [r.workflow_id, r.executions])).toEqual([
      ["", 3],
      ["wf", 3],
    ]);
  });

  it("runs on every shard from the cron (it is one of PERIODIC_TASKS): a workspace's rows live on its shard only", async () => {
    expect(PERIODIC_TASKS).toContain(statsRollupTask);
    const T = hourOn(7);
    const far = await statsWorkspace("far", 1);
    const near = await statsWorkspace("near", 0);
    await trigger(far, "wf", { n: 1 });
    await trigger(near, "wf", { n: 1 });
    await createdIn(far, T);
    await createdIn(near, T);
    await setMarks(real.DB, T);
    await setMarks(real.DB_1, T);
    const e = { ...real, WORKSPACE_SHARDS: `${far.workspace}:1` } as unknown as Env;
    await runOnEveryShard(
      [statsRollupTask],
      e,
      { cron: "* * * * *", scheduledTime: T + HOUR_MS + 5 * MINUTE_MS },
      createExecutionContext(),
    );
    expect((await rollupRows(shardDb(1), far.workspace)).length).toBe(2);
    expect(await rollupRows(shardDb(0), far.workspace)).toEqual([]);
    expect((await rollupRows(shardDb(0), near.workspace)).length).toBe(2);
    expect(await rollupRows(shardDb(1), near.workspace)).toEqual([]);
    // The task names its shard in its report.
    const report = await statsRollupTask.run(shardEnv(e, 1), { cron: "* * * * *", scheduledTime: T }, createExecutionContext());
    expect(report.shard).toBe(1);
  });
});

describe("retention", () => {
  it("keeps a row 400 days, then sweeps it (bounded, oldest first), whatever became of the executions", async () => {
    const now = hourOn(8) + 30 * MINUTE_MS;
    const workspace = `retention-${crypto.randomUUID().slice(0, 8)}`;
    const insert = (hour: number) =>
      real.DB.prepare("INSERT INTO stats_hourly (workspace, workflow_id, hour, executions, rolled_at) VALUES (?1, 'wf', ?2, 1, ?2)")
        .bind(workspace, hour)
        .run();
    const old = Math.floor((now - STATS_RETENTION_MS) / HOUR_MS) * HOUR_MS - HOUR_MS;
    const kept = old + 2 * HOUR_MS;
    await insert(old);
    await insert(kept);
    await setMarks(real.DB, Math.floor(now / HOUR_MS) * HOUR_MS);
    const report = await runRollup(real.DB, now);
    expect(report.swept).toBeGreaterThanOrEqual(1);
    expect((await rollupRows(real.DB, workspace)).map((r) => r.hour)).toEqual([kept]);
    expect(STATS_RETENTION_MS).toBe(400 * 86_400_000);
  });
});

describe("the retention sweep's bound", () => {
  it("one tick deletes at most ROLLUP_SWEEP_LIMIT rows, oldest first; the rest go on later ticks", async () => {
    const workspace = `bound-${crypto.randomUUID().slice(0, 8)}`;
    // Older than every other row of this file: the sweep, oldest first, reaches these first.
    const first = Date.UTC(2019, 0, 1);
    const rows = ROLLUP_SWEEP_LIMIT + 5;
    await real.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?3 - 1)
       INSERT INTO stats_hourly (workspace, workflow_id, hour, executions, rolled_at) SELECT ?1, 'wf', ?2 + i * 3600000, 1, ?2 FROM n`,
    )
      .bind(workspace, first, rows)
      .run();
    const now = hourOn(11);
    await setMarks(real.DB, Math.floor(now / HOUR_MS) * HOUR_MS);
    const report = await runRollup(real.DB, now);
    expect(report.swept).toBe(ROLLUP_SWEEP_LIMIT);
    // The five newest are left for the next tick.
    expect((await rollupRows(real.DB, workspace)).map((r) => r.hour)).toEqual(
      Array.from({ length: 5 }, (_, i) => first + (ROLLUP_SWEEP_LIMIT + i) * HOUR_MS),
    );
    // The ledger's statement takes the bound it is given.
    expect((await startRollupTick(real.DB, first + rows * HOUR_MS, 2)).swept).toBe(2);
    expect((await rollupRows(real.DB, workspace)).map((r) => r.hour)).toEqual(
      Array.from({ length: 3 }, (_, i) => first + (ROLLUP_SWEEP_LIMIT + 2 + i) * HOUR_MS),
    );
  });
});

describe("the task's bounds", () => {
  it("an idle minute is one round trip (the sweep and the marks); a due hour two, within ROLLUP_TASK_QUERIES statements", async () => {
    const T = hourOn(9);
    await setMarks(real.DB, T + HOUR_MS);
    const counted = countingD1(real.DB);
    await runRollup(counted.db, T + HOUR_MS + 30 * MINUTE_MS);
    expect([counted.roundTrips(), counted.statements()]).toEqual([1, 2]);

    counted.reset();
    await runRollup(counted.db, T + 2 * HOUR_MS + 5 * MINUTE_MS);
    expect(counted.roundTrips()).toBe(2);
    expect(counted.statements()).toBeLessThanOrEqual(ROLLUP_TASK_QUERIES);
  });

  it("catching up (a fresh database, a stopped cron) rolls at most MAX_HOURS_PER_ROLL hours a pass, from BACKFILL_HOURS back", async () => {
    const now = hourOn(10) + 10 * MINUTE_MS;
    await setMarks(real.DB, null);
    const counted = countingD1(real.DB);
    const first = await runRollup(counted.db, now);
    const floor = Math.floor(now / HOUR_MS) * HOUR_MS - BACKFILL_HOURS * HOUR_MS;
    expect(first.rolled).toEqual([{ from: floor, to: floor + MAX_HOURS_PER_ROLL * HOUR_MS }]);
    expect(counted.statements()).toBeLessThanOrEqual(ROLLUP_TASK_QUERIES);
    // Marks 30 days behind (a long outage): the passes restart at the backfill's floor.
    await setMarks(real.DB, floor - 30 * 24 * HOUR_MS);
    const second = await runRollup(real.DB, now);
    expect(second.rolled[0]?.from).toBe(floor);
    // Every tick moves on: the closed pass reaches the last closed hour in BACKFILL_HOURS / MAX_HOURS_PER_ROLL ticks.
    for (let i = 0; i < BACKFILL_HOURS / MAX_HOURS_PER_ROLL; i++) await runRollup(real.DB, now);
    expect((await marksOf(real.DB)).closed).toBe(Math.floor(now / HOUR_MS) * HOUR_MS);
  });
});
