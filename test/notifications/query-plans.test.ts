/**
 * The notification statements read by index only (EXPLAIN QUERY PLAN): the cron's re-send, stuck
 * scan and removal, a delivery's claim (by id, by execution) and settle, the deliveries page, and
 * both triggers' bodies. A scan of a table that grows with executions or notifications would make
 * every tick (or every failure) slower as they pile up.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { countingD1 } from "../helpers/counting-d1";
import { planOf, scansOf, triggerBodies } from "../helpers/query-plans";
import {
  claimNotification,
  listDeliveries,
  overdueNotifications,
  recordStuckSteps,
  removeSettledNotifications,
  settleNotification,
} from "../../src/notifications/outbox";

/** The growing tables, and the aliases the statements give them (a plan names a table by its alias). */
const GROWING = ["executions", "steps", "notification_outbox", "workspace_secrets", "e", "st", "o", "ws", "x", "f"];

describe("the notification statements' query plans", () => {
  it("no statement scans a table that grows", async () => {
    const counted = countingD1(env.DB);
    const db = counted.db;
    await overdueNotifications(db, 0);
    await recordStuckSteps(db, 0);
    await removeSettledNotifications(db, 0);
    await claimNotification(db, { id: 1 }, 0);
    await claimNotification(db, { executionId: "x", event: "execution.failed" }, 0);
    await settleNotification(db, 1, 1, 0, { status: "delivered", answerStatus: 200, answer: "" });
    await listDeliveries(db, "w", 10, null);
    const statements = [
      ...counted.calls.flatMap((c) => c.sql),
      ...(await triggerBodies(["executions_failed_notify", "executions_deleted_outbox"])).map((t) => t.sql),
    ];
    expect(statements.length).toBe(9);
    for (const sql of statements) {
      const plan = await planOf(sql);
      expect(scansOf(plan, GROWING), `${sql}\n→ ${plan.join("\n  ")}`).toEqual([]);
    }
  });
});
