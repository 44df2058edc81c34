/**
 * The events' statements read by index only (docs/waits.md): the delivery batch, the wait's
 * registration batch, its park and the waits listing, checked with EXPLAIN QUERY PLAN. Each runs
 * on every event or every wait claim; a scan of a table that grows with executions or events would
 * slow every one of them as the shard fills.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { deliverEvent, listOpenWaits, parkStep, registerWait, sumEvents } from "../../src/ledger";
import { countingD1 } from "../helpers/counting-d1";
import { planOf, scansOf, GROWING_TABLES } from "../helpers/query-plans";

const GROWING = GROWING_TABLES;

describe("the events' query plans", () => {
  it("no statement of a delivery, a wait, a park, the waits listing or the stats scans a growing table", async () => {
    const counted = countingD1(env.DB);
    const db = counted.db;
    const fence = { executionId: "x", vertexId: "v", epoch: 1 };
    const hash = "0".repeat(64);
    await deliverEvent(db, {
      workspace: "w",
      eventKey: "content:k",
      contentWindowMs: 1000,
      eventId: "e",
      name: "n",
      matchHash: hash,
      matchValue: '"m"',
      data: null,
      source: null,
      now: 1,
      bufferedUntil: 2,
      nonce: "nonce",
    });
    await registerWait(db, fence, {
      waitKey: "x/v/0",
      retryBase: 0,
      workspace: "w",
      name: "n",
      matchHash: hash,
      matchValue: '"m"',
      consume: "one",
      timeoutMs: 1000,
      now: 1,
    });
    await parkStep(db, fence, { now: 1, until: 2, waitKey: "x/v/0" });
    await listOpenWaits(db, { workspace: "w", name: "n", matchHashes: [hash], limit: 10 });
    await sumEvents(db, "w", 0);
    const statements = counted.calls.flatMap((c) => c.sql);
    expect(statements.length).toBeGreaterThanOrEqual(14);
    for (const sql of statements) {
      const plan = await planOf(sql, "x");
      expect(scansOf(plan, GROWING), `${sql}\n→ ${plan.join("\n  ")}`).toEqual([]);
    }
  });
});
