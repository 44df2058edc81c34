/**
 * The rollup and the series read by index only: every statement of a tick (the sweep, the marks,
 * a roll, the marks' advance) and of a series (the rollup's hours, the live executions and events,
 * for the workspace and for one workflow), checked with EXPLAIN QUERY PLAN. A scan of a table that
 * grows with the executions — or of the rollup itself, 400 days of rows — would make every tick
 * or every overview slower as the database grows. `workflows` (one row per workflow) is the roll's
 * outer loop: one search of `executions_by_workflow` per workflow.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { readStatsSeries, rollHours, startRollupTick } from "../../src/ledger";
import { countingD1 } from "../helpers/counting-d1";
import { planOf, scansOf, GROWING_TABLES } from "../helpers/query-plans";

/** The tables that grow with executions or with time: none may be scanned. */
const GROWING = [...GROWING_TABLES, "stats_hourly"];

/** Every statement the counted calls sent, with its plan. */
async function plansOf(run: (db: D1Database) => Promise<unknown>): Promise<Array<{ sql: string; plan: string[] }>> {
  const counted = countingD1(env.DB);
  await run(counted.db);
  const statements = counted.calls.flatMap((c) => c.sql);
  return Promise.all(statements.map(async (sql) => ({ sql, plan: await planOf(sql) })));
}

describe("the rollup's and the series' query plans", () => {
  it("no statement of a tick scans a growing table; the roll searches executions_by_workflow per workflow", async () => {
    const plans = await plansOf(async (db) => {
      await startRollupTick(db, 0, 10);
      await rollHours(db, [{ from: 0, to: 3_600_000 }], [{ pass: "closed", nextHour: 3_600_000 }], 1);
    });
    expect(plans.length).toBe(4);
    for (const { sql, plan } of plans) expect(scansOf(plan, GROWING), `${sql}\n→ ${plan.join("\n  ")}`).toEqual([]);
    const roll = plans.find((p) => p.sql.includes("INSERT INTO stats_hourly"))!.plan.join("\n");
    expect(roll).toMatch(
      /SEARCH e USING INDEX executions_by_workflow \(workspace=\? AND workflow_id=\? AND created_at>\? AND created_at<\?\)/,
    );
    expect(roll).toMatch(/SEARCH events USING (COVERING )?INDEX events_received/);
    const sweep = plans.find((p) => p.sql.startsWith("DELETE FROM stats_hourly"))!.plan.join("\n");
    expect(sweep).toMatch(/stats_hourly_age/);
  });

  it("no statement of a series scans: the rollup's key range, executions_by_workspace or _by_workflow, the events' index", async () => {
    for (const workflowId of [null, "wf"]) {
      const plans = await plansOf((db) =>
        readStatsSeries(db, { workspace: "w", workflowId, since: 0, until: 86_400_000, bucketMs: 3_600_000, liveFloor: 0 }),
      );
      expect(plans.length).toBe(workflowId === null ? 4 : 3);
      for (const { sql, plan } of plans) expect(scansOf(plan, GROWING), `${sql}\n→ ${plan.join("\n  ")}`).toEqual([]);
      const text = plans.map((p) => p.plan.join("\n")).join("\n");
      expect(text).toMatch(
        /SEARCH stats_hourly USING INDEX sqlite_autoindex_stats_hourly_1 \(workspace=\? AND workflow_id=\? AND hour>\? AND hour<\?\)/,
      );
      expect(text).toMatch(
        workflowId === null ? /executions_by_workspace \(workspace=\? AND created_at>\? AND created_at<\?\)/ : /executions_by_workflow/,
      );
      // The live events: the hours' range of `events_received`, not every event the workspace keeps.
      if (workflowId === null) expect(text).toMatch(/SEARCH events USING INDEX events_received \(received_at>\? AND received_at<\?\)/);
    }
  });
});
