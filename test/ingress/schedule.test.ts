import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../src/index";
import { ingressTask } from "../../src/ingress/cron";
import { fireSchedules } from "../../src/ingress/schedule";
import { deliveredEnv } from "../helpers/shards";
import { countRows, countingQueue, seedWorkflow, transformWorkflow, unique } from "./helpers";

describe("scheduled starts", () => {
  it("makes one execution of a tick delivered twice, and a new one for the next tick", async () => {
    const id = unique("sched");
    await seedWorkflow("dev", transformWorkflow(id, { schedule: "0 9 * * *" }));
    const { queue, sent } = countingQueue();
    const deps = { db: env.DB, queue, now: () => Date.now() };
    const tick = Date.UTC(2026, 11, 2, 9, 0, 0);

    const first = await fireSchedules(deps, "0 9 * * *", tick);
    const redelivered = await fireSchedules(deps, "0 9 * * *", tick);
    const mine = (r: typeof first) => r.started.filter((s) => s.executionId && s.identity === "schedule");
    const a = await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id);
    expect(a).toBe(1);
    expect(mine(first).some((s) => !s.deduplicated)).toBe(true);
    expect(redelivered.started.every((s) => s.deduplicated)).toBe(true);

    await fireSchedules(deps, "0 9 * * *", tick + 86_400_000);
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id)).toBe(2);
    expect(
      await countRows(
        "SELECT count(*) AS n FROM executions WHERE workflow_id = ? AND trigger_kind = 'schedule' AND identity_kind = 'schedule'",
        id,
      ),
    ).toBe(2);
    expect(sent.filter((m) => m.vertexId === "shape")).toHaveLength(2);
  });

  it("only starts workflows whose schedule is the firing cron", async () => {
    const hourly = unique("hourly");
    await seedWorkflow("dev", transformWorkflow(hourly, { schedule: "0 * * * *" }));
    const { queue } = countingQueue();
    await fireSchedules({ db: env.DB, queue, now: () => Date.now() }, "* * * * *", Date.UTC(2026, 0, 1, 0, 1));
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", hourly)).toBe(0);
  });

  it("runs from the Worker's scheduled handler, and a duplicate tick there is one execution too", async () => {
    const id = unique("cron");
    await seedWorkflow("dev", transformWorkflow(id, { schedule: "0 * * * *" }));
    const scheduledTime = Date.UTC(2026, 5, 1, 12, 0, 0);
    for (let i = 0; i < 2; i++) {
      const ctx = createExecutionContext();
      // The Worker's env as the runtime delivers it: every shard under its own binding.
      await worker.scheduled(createScheduledController({ cron: "0 * * * *", scheduledTime }), deliveredEnv(env), ctx);
      await waitOnExecutionContext(ctx);
    }
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id)).toBe(1);
    const payload = await env.DB.prepare("SELECT payload FROM executions WHERE workflow_id = ?").bind(id).first<{ payload: string }>();
    expect(JSON.parse(payload!.payload)).toEqual({ cron: "0 * * * *", scheduledTime: "2026-06-01T12:00:00.000Z" });
  });

  it("sweeps expired identities from the cron", async () => {
    await env.DB.prepare(
      "INSERT INTO execution_identities (identity, workspace, workflow_id, execution_id, claim_token, window_start, expires_at) " +
        "VALUES (?, 'dev', 'gone', 'x', 't', 1, 2)",
    )
      .bind("f".repeat(64))
      .run();
    await ingressTask.run(env, { cron: "0 0 1 1 *", scheduledTime: Date.now() }, createExecutionContext());
    expect(await countRows("SELECT count(*) AS n FROM execution_identities WHERE identity = ?", "f".repeat(64))).toBe(0);
  });
});
