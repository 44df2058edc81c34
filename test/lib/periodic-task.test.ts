import { createExecutionContext, env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PartialFailure, runPeriodicTasks, type PeriodicTask, type Tick } from "../../src/lib/periodic-task";
import { PERIODIC_TASKS } from "../../src/scheduled";

afterEach(() => vi.restoreAllMocks());

const TICK: Tick = { cron: "* * * * *", scheduledTime: Date.UTC(2026, 0, 5, 9, 0) };

/** Every JSON line the log wrote, whatever its level. */
function captureLog(): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  for (const method of ["log", "warn", "error"] as const) {
    vi.spyOn(console, method).mockImplementation((line: unknown) => void lines.push(JSON.parse(String(line)) as Record<string, unknown>));
  }
  return lines;
}

/** A task whose report is a count; it logs a line (any event of the vocabulary will do) only when the count is not 0. */
function countingTask(name: string, run: (tick: Tick) => Promise<number>): PeriodicTask<number> {
  return {
    name,
    run: (_env, tick) => run(tick),
    logLine: (count) => (count === 0 ? null : { level: "info", event: "reaper.redispatched", fields: { task: name, count } }),
  };
}

describe("runPeriodicTasks", () => {
  it("runs every task on the tick, writes each report's line, and an idle report writes nothing", async () => {
    const lines = captureLog();
    const seen: Tick[] = [];
    const busy = countingTask("busy", async (tick) => (seen.push(tick), 3));
    const idle = countingTask("idle", async (tick) => (seen.push(tick), 0));
    await runPeriodicTasks([busy, idle], env, TICK, createExecutionContext());
    expect(seen).toEqual([TICK, TICK]);
    expect(lines).toEqual([{ task: "busy", count: 3, level: "info", event: "reaper.redispatched" }]);
  });

  it("a task that throws is logged as cron.task_failed with its name and stops none of the others", async () => {
    const lines = captureLog();
    const failing = countingTask("failing", async () => {
      throw new Error("D1 is down");
    });
    // Started after the failing task and still running when it fails.
    const slow = countingTask("slow", () => new Promise((resolve) => setTimeout(() => resolve(1), 20)));
    await expect(runPeriodicTasks([failing, slow], env, TICK, createExecutionContext())).resolves.toBeUndefined();
    expect(lines).toEqual([
      { task: "failing", error: "D1 is down", level: "error", event: "cron.task_failed" },
      { task: "slow", count: 1, level: "info", event: "reaper.redispatched" },
    ]);
  });

  it("a partial failure writes the report of the part that ran, then the failure", async () => {
    const lines = captureLog();
    const partial = countingTask("partial", async () => {
      throw new PartialFailure(2, new Error("schedules failed"));
    });
    await runPeriodicTasks([partial], env, TICK, createExecutionContext());
    expect(lines).toEqual([
      { task: "partial", count: 2, level: "info", event: "reaper.redispatched" },
      { task: "partial", error: "schedules failed", level: "error", event: "cron.task_failed" },
    ]);
  });
});

describe("the cron's periodic tasks", () => {
  it("are one per subsystem, under the names cron.task_failed reports them by", () => {
    expect(PERIODIC_TASKS.map((task) => task.name)).toEqual([
      "ledger sweep",
      "ingress",
      "steps reaper",
      "steps wake-up",
      "history sweep",
      "storage figures",
      "placement audit",
      "stats rollup",
      "notifications",
    ]);
  });
});
