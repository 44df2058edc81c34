/**
 * Schedules at scale (docs/ingress.md "Schedules"): a tick reads only its cron's workflows, starts
 * at most a bounded number per invocation (the rest next time, none starved), records a failed
 * start where an operator sees it and retries it while the minute is recent, and its identity is
 * the scheduled minute, whatever timestamp a (re)delivery carries.
 */
import { SELF, env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { fireSchedules } from "../../src/ingress/schedule";
import { scheduledMinute } from "../../src/ingress/tick";
import type { IngressDeps } from "../../src/ingress/start";
import { BASE, countRows, countingQueue, seedWorkflow, transformWorkflow, unique } from "./helpers";

const HOUR = 3_600_000;

/** A D1 wrapper that adds up `rows_read` of every statement (real D1 does the work). */
function rowsReadCounter(real: D1Database) {
  let rowsRead = 0;
  const add = <T extends D1Result | D1Result[]>(r: T): T => {
    for (const one of Array.isArray(r) ? r : [r]) rowsRead += one.meta.rows_read ?? 0;
    return r;
  };
  const wrap = (stmt: D1PreparedStatement): D1PreparedStatement =>
    ({
      real: stmt,
      bind: (...v: unknown[]) => wrap(stmt.bind(...v)),
      run: async () => add(await stmt.run()),
      all: async () => add(await stmt.all()),
      first: async () => {
        const r = add(await stmt.all());
        return r.results[0] ?? null;
      },
    }) as unknown as D1PreparedStatement;
  const db = {
    prepare: (sql: string) => wrap(real.prepare(sql)),
    batch: async (stmts: D1PreparedStatement[]) =>
      add(await real.batch(stmts.map((s) => (s as unknown as { real: D1PreparedStatement }).real))),
  } as unknown as D1Database;
  return { db, rowsRead: () => rowsRead, reset: () => (rowsRead = 0) };
}

function depsAt(t: number, db: D1Database = env.DB): IngressDeps {
  return { db, queue: countingQueue().queue, now: () => t };
}

const executionsOf = (id: string) => countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id);

async function scheduleRuns(id: string) {
  const res = await SELF.fetch(`${BASE}/v1/workflows/${id}`, { headers: { authorization: "Bearer dev-token" } });
  expect(res.status).toBe(200);
  return (
    await res.json<{
      scheduleRuns: Array<{ scheduledTime: string; status: string; attempts: number; executionId: string | null; error: string | null }>;
    }>()
  ).scheduleRuns;
}

describe("the tick's identity is its scheduled minute", () => {
  it("maps a delivery to the latest matching minute within the lookback, else to its own minute", () => {
    const at = (h: number, m: number, s = 0) => Date.UTC(2026, 11, 2, h, m, s); // a Wednesday
    expect(scheduledMinute("0 9 * * *", at(9, 0, 37))).toBe(at(9, 0));
    expect(scheduledMinute("0 9 * * *", at(9, 5, 10))).toBe(at(9, 0));
    expect(scheduledMinute("0 9 * * *", at(10, 0))).toBe(at(9, 0)); // 60 minutes back, still the tick
    expect(scheduledMinute("0 9 * * *", at(10, 1))).toBe(at(10, 1)); // no tick in the last hour: its own minute
    expect(scheduledMinute("*/15 * * * *", at(10, 7, 59))).toBe(at(10, 0));
    expect(scheduledMinute("0 9-17 * * MON-FRI", at(12, 30))).toBe(at(12, 0));
    expect(scheduledMinute("0 9 * * SAT", at(9, 3))).toBe(at(9, 3)); // not Saturday: its own minute
    // A numeric weekday is read differently by cron dialects: not guessed, floored.
    expect(scheduledMinute("0 9 * * 3", at(9, 3, 20))).toBe(at(9, 3));
  });

  it("starts one execution for deliveries of the same tick with different timestamps, within and after the minute", async () => {
    const id = unique("minute");
    await seedWorkflow("dev", transformWorkflow(id, { schedule: "0 9 * * *" }));
    const nine = Date.UTC(2026, 11, 3, 9, 0, 0);
    const deliveries = [nine + 5_000, nine + 50_000, nine + 5 * 60_000 + 10_000];
    const results = [];
    for (const t of deliveries) results.push(await fireSchedules(depsAt(t), "0 9 * * *", t));
    expect(results.map((r) => r.scheduledAt)).toEqual([nine, nine, nine]);
    expect(await executionsOf(id)).toBe(1);
    const payload = await env.DB.prepare("SELECT payload FROM executions WHERE workflow_id = ?").bind(id).first<{ payload: string }>();
    expect(JSON.parse(payload!.payload)).toEqual({ cron: "0 9 * * *", scheduledTime: "2026-12-03T09:00:00.000Z" });
    // The next day's tick is a new execution.
    await fireSchedules(depsAt(nine + 24 * HOUR + 3_000), "0 9 * * *", nine + 24 * HOUR + 3_000);
    expect(await executionsOf(id)).toBe(2);
  });
});

describe("a tick at scale", () => {
  it("reads only the workflows on the tick's cron", async () => {
    const mine = unique("only");
    await seedWorkflow("dev", transformWorkflow(mine, { schedule: "17 4 * * *" }));
    for (let i = 0; i < 120; i++) await seedWorkflow("dev", transformWorkflow(unique("other"), { schedule: "18 4 * * *" }));
    const t = Date.UTC(2027, 0, 5, 4, 17);
    const counter = rowsReadCounter(env.DB);
    const report = await fireSchedules(depsAt(t, counter.db), "17 4 * * *", t);
    expect(report.recorded).toBe(1);
    expect(report.started.filter((s) => !s.deduplicated)).toHaveLength(1);
    expect(await executionsOf(mine)).toBe(1);
    // The 120 workflows on another cron are not read (a listing of every scheduled workflow reads 120+ workflows and
    // their versions); the whole tick, start included, stays under 100.
    expect(counter.rowsRead()).toBeLessThan(100);
  });

  it("starts at most the per-tick bound; the rest are started by the next invocations (of any cron)", async () => {
    const ids = Array.from({ length: 5 }, () => unique("bound"));
    for (const id of ids) await seedWorkflow("dev", transformWorkflow(id, { schedule: "45 5 * * *" }));
    const t = Date.UTC(2027, 1, 9, 5, 45);
    const count = async () => (await Promise.all(ids.map(executionsOf))).reduce((a, b) => a + b, 0);

    const first = await fireSchedules(depsAt(t), "45 5 * * *", t, { startsPerTick: 2 });
    expect(first.recorded).toBe(5);
    expect(first.started).toHaveLength(2);
    expect(await count()).toBe(2);
    // The every-minute cron picks up the daily tick's backlog.
    await fireSchedules(depsAt(t + 60_000), "* * * * *", t + 60_000, { startsPerTick: 2 });
    expect(await count()).toBe(4);
    await fireSchedules(depsAt(t + 120_000), "* * * * *", t + 120_000, { startsPerTick: 2 });
    expect(await count()).toBe(5);
    for (const id of ids) expect(await executionsOf(id)).toBe(1);
    // A late redelivery of the daily tick finds every run started: nothing more.
    const late = await fireSchedules(depsAt(t + 180_000), "45 5 * * *", t + 30_000, { startsPerTick: 2 });
    expect(late.recorded).toBe(0);
    expect(late.started).toHaveLength(0);
    expect(await count()).toBe(5);
    for (const id of ids) expect((await scheduleRuns(id))[0]).toMatchObject({ status: "STARTED", attempts: 1 });
  });

  it("shows a failed start on the workflow read and retries it on the next tick; it expires once the minute is not recent", async () => {
    const flaky = unique("flaky");
    const broken = unique("broken");
    await seedWorkflow("dev", transformWorkflow(flaky, { schedule: "20 6 * * *" }));
    await seedWorkflow("dev", transformWorkflow(broken, { schedule: "20 6 * * *" }));
    // A real failure of the start's batch: the store refuses these workflows' executions.
    await env.DB.prepare(
      `CREATE TRIGGER test_schedule_start_fails BEFORE INSERT ON executions
       WHEN NEW.workflow_id IN ('${flaky}', '${broken}') BEGIN SELECT RAISE(ABORT, 'test: the store refuses this execution'); END`,
    ).run();
    const t = Date.UTC(2027, 2, 1, 6, 20);
    const first = await fireSchedules(depsAt(t), "20 6 * * *", t);
    expect(first.failed.map((f) => f.workflowId).sort()).toEqual([broken, flaky].sort());
    expect(await executionsOf(flaky)).toBe(0);
    const [run] = await scheduleRuns(flaky);
    expect(run).toMatchObject({ scheduledTime: "2027-03-01T06:20:00.000Z", status: "FAILED", attempts: 1, executionId: null });
    expect(run!.error).toContain("the store refuses this execution");

    // The cause goes away for one of them; the next invocation retries the same minute.
    await env.DB.prepare("DROP TRIGGER test_schedule_start_fails").run();
    await env.DB.prepare(
      `CREATE TRIGGER test_schedule_start_fails BEFORE INSERT ON executions
       WHEN NEW.workflow_id = '${broken}' BEGIN SELECT RAISE(ABORT, 'test: the store refuses this execution'); END`,
    ).run();
    const next = await fireSchedules(depsAt(t + 60_000), "* * * * *", t + 60_000);
    expect(next.started.map((s) => s.deduplicated)).toEqual([false]);
    expect(await executionsOf(flaky)).toBe(1);
    const [retried] = await scheduleRuns(flaky);
    expect(retried).toMatchObject({ scheduledTime: "2027-03-01T06:20:00.000Z", status: "STARTED", attempts: 2, error: null });
    expect(retried!.executionId).toMatch(/^[0-9a-f]{64}$/);
    const payload = await env.DB.prepare("SELECT payload FROM executions WHERE workflow_id = ?").bind(flaky).first<{ payload: string }>();
    expect(JSON.parse(payload!.payload).scheduledTime).toBe("2027-03-01T06:20:00.000Z");

    // The other keeps failing until its minute is no longer recent (1 hour): then it is EXPIRED, error kept.
    expect((await scheduleRuns(broken))[0]).toMatchObject({ status: "FAILED", attempts: 2 });
    await fireSchedules(depsAt(t + HOUR + 60_000), "* * * * *", t + HOUR + 60_000);
    const [gaveUp] = await scheduleRuns(broken);
    expect(gaveUp).toMatchObject({ scheduledTime: "2027-03-01T06:20:00.000Z", status: "EXPIRED", attempts: 2 });
    expect(gaveUp!.error).toContain("the store refuses this execution");
    expect(await executionsOf(broken)).toBe(0);
    await env.DB.prepare("DROP TRIGGER test_schedule_start_fails").run();
  });
});
