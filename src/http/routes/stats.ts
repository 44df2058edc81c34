/**
 * `GET /v1/stats?since=`: the duplicates idemflow stopped, per workflow of the bearer's workspace,
 * summed over the executions created at or after `since` (an ISO 8601 date-time; default 24 hours
 * ago) — one query (src/ledger `sumDuplicatesStopped`). Each count is where the duplicate was
 * stopped: `triggers` (the dedupe), `redeliveries` (the claim), `fencedOut` (the fence),
 * `destinationReplays` (the destination's own idempotency store); `events`: the events the workspace
 * received since then and the duplicate deliveries they absorbed (SPEC section 14).
 *
 * `GET /v1/stats/series?bucket=&since=&until=&workflowId=`: the same boundaries and the executions
 * by status per UTC hour or day, from the hourly rollup that outlives the executions (SPEC section
 * 15; src/stats), with the hours not rolled up yet computed live — one batch (src/ledger
 * `readStatsSeries`). The overview page of the inspector draws it.
 */
import { Hono } from "hono";
import { readStatsSeries, sumDuplicatesStopped, sumEvents } from "../../ledger";
import { isoTime } from "../../lib/iso-time";
import { liveFloorAt, seriesAnswer, seriesRange } from "../../stats/series";
import { executionProblems } from "../../steps/problems";
import { requireWorkspace, type AppEnv } from "../auth";
import { StatsQuery, StatsSeriesQuery } from "../openapi/requests";
import { parseQuery, timeOf } from "../query-params";
import { nowOf } from "../../lib/clock";

export const statsRoutes = new Hono<AppEnv>();

statsRoutes.use("*", requireWorkspace);

const DEFAULT_WINDOW_MS = 24 * 3_600_000;

statsRoutes.get("/", async (c) => {
  const since = timeOf(parseQuery(StatsQuery, c.req.query()).since) ?? nowOf(c.env) - DEFAULT_WINDOW_MS;
  const workflows = await sumDuplicatesStopped(c.env.DB, c.get("workspace"), since);
  // Events are the workspace's, not an execution's: received since, and the duplicates they absorbed.
  const events = await sumEvents(c.env.DB, c.get("workspace"), since);
  const total = { executions: 0, triggers: 0, redeliveries: 0, fencedOut: 0, destinationReplays: 0 };
  for (const w of workflows) {
    for (const k of Object.keys(total) as Array<keyof typeof total>) total[k] += w[k];
  }
  return c.json({ since: isoTime(since), workflows, total, events });
});

statsRoutes.get("/series", async (c) => {
  const query = parseQuery(StatsSeriesQuery, c.req.query());
  const now = nowOf(c.env);
  const range = seriesRange({ bucket: query.bucket, since: timeOf(query.since), until: timeOf(query.until) }, now);
  if ("refused" in range) throw executionProblems.invalidParameter(range.parameter, range.message);
  const workflowId = query.workflowId ?? null;
  const records = await readStatsSeries(c.env.DB, {
    workspace: c.get("workspace"),
    workflowId,
    since: range.since,
    until: range.until,
    bucketMs: range.bucketMs,
    liveFloor: liveFloorAt(now),
  });
  return c.json(seriesAnswer(range, records, workflowId));
});
