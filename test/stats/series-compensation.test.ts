/**
 * The status chart's compensation statuses (issue 45, docs/steps.md "Compensation"):
 * `GET /v1/stats/series` counts COMPENSATING, COMPENSATED and COMPENSATION_FAILED apart in the live
 * part and in the hours the rollup rolled (its columns from migrations/0037) — never in RUNNING or
 * FAILED, never nowhere: the statuses always add up to the executions.
 */
import { describe, expect, it } from "vitest";
import { DAY_MS } from "../../src/ledger";
import { StatsSeries } from "../../src/http/openapi/responses";
import { runRollup } from "../../src/stats/rollup-task";
import type { PlacedWorkspace } from "../helpers/placed-workspace";
import { createdIn, HOUR_MS, MINUTE_MS, setMarks, shardDb, statsWorkspace, trigger } from "./helpers";

interface Series {
  buckets: Array<{ start: string; live: boolean; executions: number; byStatus: Record<string, number> }>;
  total: { executions: number; byStatus: Record<string, number> };
}

async function series(w: PlacedWorkspace, query: string): Promise<Series> {
  const res = await w.call("GET", `/v1/stats/series${query}`);
  expect(res.status, await res.clone().text()).toBe(200);
  const body = await res.json<Series>();
  StatsSeries.parse(body);
  return body;
}

const iso = (t: number) => new Date(t).toISOString();
const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

/** Four executions of `w`: COMPLETED, COMPENSATING, COMPENSATED and COMPENSATION_FAILED (set on the rows). */
async function fourStatuses(w: PlacedWorkspace): Promise<string[]> {
  const ids = [];
  for (let n = 0; n < 4; n++) ids.push(await trigger(w, "wf", { n }));
  await w.deliverAll();
  const db = shardDb(w.shard);
  const set = (id: string, status: string, finished: boolean) =>
    db
      .prepare(`UPDATE executions SET status = ?2, finished_at = iif(?3, coalesce(finished_at, updated_at), NULL) WHERE id = ?1`)
      .bind(id, status, finished ? 1 : 0)
      .run();
  await set(ids[1]!, "COMPENSATING", false);
  await set(ids[2]!, "COMPENSATED", true);
  await set(ids[3]!, "COMPENSATION_FAILED", true);
  return ids;
}

describe("the status chart's compensation statuses", () => {
  it("the live part counts each compensation status apart", async () => {
    const w = await statsWorkspace("comp-live");
    await fourStatuses(w);
    const body = await series(w, "");
    expect(body.total.byStatus).toEqual({
      RUNNING: 0,
      COMPLETED: 1,
      FAILED: 0,
      CANCELLED: 0,
      COMPENSATING: 1,
      COMPENSATED: 1,
      COMPENSATION_FAILED: 1,
    });
    expect(sum(body.total.byStatus)).toBe(body.total.executions);
  });

  it("a rolled-up hour counts each compensation status apart too: the statuses still add up", async () => {
    const w = await statsWorkspace("comp-rolled");
    const db = shardDb(w.shard);
    const day = Math.floor((Date.now() - 10 * DAY_MS) / DAY_MS) * DAY_MS;
    await fourStatuses(w);
    await createdIn(w, day + 2 * HOUR_MS);
    await setMarks(db, day);
    await runRollup(db, day + 3 * HOUR_MS + 5 * MINUTE_MS);
    const body = await series(w, `?since=${iso(day)}&until=${iso(day + DAY_MS)}`);
    const hour = body.buckets[2]!;
    expect(hour).toMatchObject({ live: false, executions: 4 });
    expect(hour.byStatus).toEqual({
      RUNNING: 0,
      COMPLETED: 1,
      FAILED: 0,
      CANCELLED: 0,
      COMPENSATING: 1,
      COMPENSATED: 1,
      COMPENSATION_FAILED: 1,
    });
    expect(sum(hour.byStatus)).toBe(hour.executions);
    // The rollup's own row (the workflow's and the workspace's), not only the series: seven statuses, one each.
    const rows = await db
      .prepare(
        `SELECT workflow_id AS workflowId, executions, running, completed, failed, cancelled, compensating, compensated,
                compensation_failed AS compensationFailed
         FROM stats_hourly WHERE workspace = ?1 AND hour = ?2 ORDER BY workflow_id`,
      )
      .bind(w.workspace, day + 2 * HOUR_MS)
      .all();
    const split = {
      executions: 4,
      running: 0,
      completed: 1,
      failed: 0,
      cancelled: 0,
      compensating: 1,
      compensated: 1,
      compensationFailed: 1,
    };
    expect(rows.results).toEqual([
      { workflowId: "", ...split },
      { workflowId: "wf", ...split },
    ]);
  });
});
