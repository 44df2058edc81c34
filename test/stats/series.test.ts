/**
 * `GET /v1/stats/series` (src/http/routes/stats.ts, src/stats/series.ts): every bucket of the range,
 * the rolled-up hours from the rollup and the hours not rolled up yet computed live (never both),
 * hours summed into days, one workflow or the workspace (with its events), only the bearer's
 * workspace on its shard, the range checked with problem+json, and the answer as the OpenAPI
 * document states it. `GET /v1/stats` answers as before.
 */
import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { DAY_MS } from "../../src/ledger";
import { StatsSeries } from "../../src/http/openapi/responses";
import { runRollup } from "../../src/stats/rollup-task";
import { MAX_BUCKETS, seriesRange } from "../../src/stats/series";
import type { PlacedWorkspace } from "../helpers/placed-workspace";
import { createdIn, HOUR_MS, MINUTE_MS, setMarks, shardDb, statsWorkspace, trigger } from "./helpers";

interface Counts {
  executions: number;
  triggers: number;
  redeliveries: number;
  fencedOut: number;
  destinationReplays: number;
  byStatus: Record<"RUNNING" | "COMPLETED" | "FAILED" | "CANCELLED", number>;
  events: { received: number; duplicates: number } | null;
}
interface Series {
  bucket: "hour" | "day";
  since: string;
  until: string;
  workflowId: string | null;
  rolledUpUntil: string | null;
  liveSince: string;
  buckets: Array<Counts & { start: string; live: boolean }>;
  total: Counts;
}

async function series(w: PlacedWorkspace, query: string): Promise<Series> {
  const res = await w.call("GET", `/v1/stats/series${query}`);
  expect(res.status, await res.clone().text()).toBe(200);
  const body = await res.json<Series>();
  StatsSeries.parse(body);
  return body;
}

const iso = (t: number) => new Date(t).toISOString();
const hourNow = () => Math.floor(Date.now() / HOUR_MS) * HOUR_MS;

describe("GET /v1/stats/series", () => {
  it("answers the current hour live, with the duplicates just stopped: every bucket of the default day, oldest first", async () => {
    const w = await statsWorkspace("live", 0, ["wf", "other-wf"]);
    await trigger(w, "wf", { n: 1 });
    await trigger(w, "wf", { n: 1 });
    await trigger(w, "wf", { n: 1 });
    await trigger(w, "other-wf", { n: 2 });
    const body = await series(w, "");
    expect(body.bucket).toBe("hour");
    expect(body.buckets.length).toBe(24);
    expect(body.workflowId).toBeNull();
    expect(Date.parse(body.until) - Date.parse(body.since)).toBe(24 * HOUR_MS);
    const last = body.buckets.at(-1)!;
    expect(last.start).toBe(iso(hourNow()));
    expect(last.live).toBe(true);
    expect(last).toMatchObject({ executions: 2, triggers: 2, byStatus: { RUNNING: 2, COMPLETED: 0, FAILED: 0, CANCELLED: 0 } });
    expect(last.events).toEqual({ received: 0, duplicates: 0 });
    expect(body.total).toMatchObject({ executions: 2, triggers: 2, redeliveries: 0, fencedOut: 0, destinationReplays: 0 });
    expect(Date.parse(body.liveSince)).toBeLessThanOrEqual(hourNow());

    // One workflow: its executions only, no events (they are the workspace's).
    const one = await series(w, "?workflowId=other-wf");
    expect(one.workflowId).toBe("other-wf");
    expect(one.total).toMatchObject({ executions: 1, triggers: 0, events: null });
    expect(one.buckets.every((b) => b.events === null)).toBe(true);

    // Another workspace sees none of it.
    const other = await statsWorkspace("live-other");
    expect((await series(other, "")).total.executions).toBe(0);
  });

  it("reads rolled-up hours from the rollup, never also live, and sums hours into UTC days", async () => {
    const w = await statsWorkspace("rolled");
    const db = shardDb(w.shard);
    const day = Math.floor((Date.now() - 10 * DAY_MS) / DAY_MS) * DAY_MS;
    const a = await trigger(w, "wf", { n: 1 });
    await trigger(w, "wf", { n: 1 });
    const b = await trigger(w, "wf", { n: 2 });
    const c = await trigger(w, "wf", { n: 3 });
    await w.deliverAll();
    await createdIn(w, day + 3 * HOUR_MS, [a, b]);
    await createdIn(w, day + 7 * HOUR_MS, [c]);
    await setMarks(db, day);
    // Two ticks: a pass rolls at most MAX_HOURS_PER_ROLL (6) hours a tick.
    await runRollup(db, day + 8 * HOUR_MS + 5 * MINUTE_MS);
    await runRollup(db, day + 8 * HOUR_MS + 6 * MINUTE_MS);

    const hours = await series(w, `?since=${iso(day)}&until=${iso(day + DAY_MS)}`);
    expect(hours.buckets.length).toBe(24);
    expect(hours.rolledUpUntil).toBe(iso(day + 8 * HOUR_MS));
    expect(hours.buckets[3]).toMatchObject({ start: iso(day + 3 * HOUR_MS), live: false, executions: 2, triggers: 1 });
    expect(hours.buckets[3]!.byStatus).toMatchObject({ RUNNING: 0, COMPLETED: 2, FAILED: 0, CANCELLED: 0 });
    expect(hours.buckets[7]).toMatchObject({ executions: 1, triggers: 0 });
    expect(hours.total.executions).toBe(3);

    // The executions are still there; the rolled-up hours are read from the rollup only (not twice).
    const days = await series(w, `?bucket=day&since=${iso(day - 2 * DAY_MS)}&until=${iso(day + DAY_MS - 1)}`);
    expect(days.buckets.map((d) => [d.start, d.executions])).toEqual([
      [iso(day - 2 * DAY_MS), 0],
      [iso(day - DAY_MS), 0],
      [iso(day), 3],
    ]);
    expect(days.total).toMatchObject({ executions: 3, triggers: 1, byStatus: { COMPLETED: 3 } });
    // A range within one hour is that hour's bucket (since rounded down, until up).
    const inner = await series(w, `?since=${iso(day + 3 * HOUR_MS + 10 * MINUTE_MS)}&until=${iso(day + 3 * HOUR_MS + 20 * MINUTE_MS)}`);
    expect(inner.buckets.map((x) => x.executions)).toEqual([2]);
  });

  it("an hour the rollup has rolled is not also counted live, even inside the live window", async () => {
    const w = await statsWorkspace("no-double");
    const db = shardDb(w.shard);
    const previous = hourNow() - HOUR_MS;
    await trigger(w, "wf", { n: 1 });
    await trigger(w, "wf", { n: 1 });
    await createdIn(w, previous);
    const before = await series(w, "");
    expect(before.buckets.at(-2)).toMatchObject({ start: iso(previous), executions: 1, triggers: 1, live: true });
    await setMarks(db, previous);
    await runRollup(db, hourNow() + 5 * MINUTE_MS);
    const after = await series(w, "");
    expect(after.rolledUpUntil).toBe(iso(hourNow()));
    expect(after.liveSince).toBe(iso(hourNow()));
    expect(after.buckets.at(-2)).toMatchObject({ start: iso(previous), executions: 1, triggers: 1, live: false });
    expect(after.total.executions).toBe(1);
  });

  it("the workspace's events and their duplicates, live", async () => {
    const w = await statsWorkspace("series-events");
    for (const id of ["e-1", "e-1", "e-2"]) await w.call("POST", "/v1/events", { name: "order.shipped", match: "A-9", id });
    const body = await series(w, "");
    expect(body.total.events).toEqual({ received: 2, duplicates: 1 });
    expect(body.buckets.at(-1)!.events).toEqual({ received: 2, duplicates: 1 });
  });

  it("a workspace on shard 1 reads its own shard's rollup", async () => {
    const w = await statsWorkspace("series-far", 1);
    const day = Math.floor((Date.now() - 5 * DAY_MS) / DAY_MS) * DAY_MS;
    await trigger(w, "wf", { n: 1 });
    await createdIn(w, day);
    await setMarks(shardDb(1), day);
    await runRollup(shardDb(1), day + HOUR_MS + 5 * MINUTE_MS);
    const body = await series(w, `?since=${iso(day)}&until=${iso(day + HOUR_MS)}&workflowId=wf`);
    expect(body.buckets).toMatchObject([{ executions: 1, live: false }]);
  });

  it("refuses a range it cannot answer with problem+json 400 invalid-query, naming the parameter", async () => {
    const w = await statsWorkspace("series-bad");
    const now = Date.now();
    for (const [query, says] of [
      [`?since=${iso(now)}&until=${iso(now - HOUR_MS)}`, "until"],
      [`?since=${iso(now - 40 * DAY_MS)}`, "since"],
      [`?bucket=day&since=${iso(now - 500 * DAY_MS)}`, "since"],
      ["?bucket=week", "bucket"],
      ["?since=yesterday", "since"],
      ["?workflowId=", "workflowId"],
      ["?workflowId=__proto__", "workflowId"],
    ] as const) {
      const res = await w.call("GET", `/v1/stats/series${query}`);
      expect(res.status, query).toBe(400);
      expect(res.headers.get("content-type")).toBe("application/problem+json");
      const problem = await res.json<{ code: string; detail: string }>();
      expect(problem.code).toBe("invalid-query");
      expect(problem.detail).toContain(says);
    }
    // 31 days of hours is the most; more asks for days.
    expect((await w.call("GET", `/v1/stats/series?since=${iso(hourNow() - 30 * DAY_MS)}`)).status).toBe(200);
    expect(seriesRange({ bucket: "hour", since: 0, until: (MAX_BUCKETS.hour + 1) * HOUR_MS }, 0)).toMatchObject({
      refused: true,
      message: expect.stringContaining("bucket=day"),
    });
    expect((await SELF.fetch("http://idemflow.test/v1/stats/series")).status).toBe(401);
  });

  it("is in the OpenAPI document with its parameters, and its answer has exactly the document's members", async () => {
    const doc = await (
      await SELF.fetch("http://idemflow.test/v1/openapi.json")
    ).json<{
      paths: Record<string, { get?: { parameters: Array<{ name: string }>; responses: Record<string, unknown> } }>;
      components: { schemas: Record<string, { properties: Record<string, unknown>; required?: string[] }> };
    }>();
    const route = doc.paths["/v1/stats/series"]?.get;
    expect(route?.parameters.map((p) => p.name).sort()).toEqual(["bucket", "since", "until", "workflowId"]);
    expect(Object.keys(route!.responses)).toEqual(expect.arrayContaining(["200", "400", "401"]));
    const schema = doc.components.schemas.StatsSeries!;
    const w = await statsWorkspace("series-doc");
    const body = await series(w, "?bucket=day");
    expect(Object.keys(body).sort()).toEqual(Object.keys(schema.properties).sort());
    expect(schema.required?.sort()).toEqual(Object.keys(schema.properties).sort());
    expect(body.buckets.length).toBe(30);
  });

  it("GET /v1/stats keeps its answer (the per-workflow sums and the events)", async () => {
    const w = await statsWorkspace("stats-compat");
    await trigger(w, "wf", { n: 1 });
    const res = await w.call("GET", "/v1/stats");
    expect(res.status).toBe(200);
    const body = await res.json<Record<string, unknown>>();
    expect(Object.keys(body).sort()).toEqual(["events", "since", "total", "workflows"]);
  });
});
