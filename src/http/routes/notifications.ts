/**
 * Notifications over HTTP (SPEC section 18, docs/notifications.md), scoped to the bearer token's workspace:
 *   PUT    /v1/notifications              `{ url, secret, events, stuckAfterSeconds? }`: set (422 with a pointer, nothing saved)
 *   GET    /v1/notifications              the setting, or 404
 *   DELETE /v1/notifications              204, or 404 (pending deliveries are given up at their next attempt)
 *   GET    /v1/notifications/deliveries   the outbox on record, newest first
 */
import { Hono } from "hono";
import { requireWorkspace, type AppEnv } from "../auth";
import { readJsonBody } from "../../lib/request-body";
import { commonProblems } from "../../lib/common-problems";
import { isoTime } from "../../lib/iso-time";
import { nowOf } from "../../lib/clock";
import { parseQuery } from "../query-params";
import { DeliveryListQuery } from "../openapi/paths/notifications";
import { keyringFrom, openSecret } from "../../secrets/crypto";
import {
  checkSecretOnRecord,
  deleteNotificationSettings,
  getNotificationSettings,
  parseNotificationSettings,
  putNotificationSettings,
  type StoredNotificationSettings,
} from "../../notifications/settings";
import { listDeliveries, type DeliveryRecord } from "../../notifications/outbox";

const MAX_BODY_BYTES = 16 * 1024;

export const notificationRoutes = new Hono<AppEnv>();
notificationRoutes.use("*", requireWorkspace);

function present(s: StoredNotificationSettings) {
  return {
    url: s.url,
    secret: s.secret,
    events: s.events,
    stuckAfterSeconds: s.stuckAfterMs === null ? null : s.stuckAfterMs / 1000,
    createdAt: isoTime(s.createdAt),
    updatedAt: isoTime(s.updatedAt),
  };
}

function presentDelivery(d: DeliveryRecord) {
  return {
    id: d.id,
    event: d.event,
    webhookId: d.webhookId,
    executionId: d.executionId,
    status: d.status,
    attempts: d.attempts,
    lastStatus: d.lastStatus,
    lastAnswer: d.lastAnswer,
    createdAt: isoTime(d.createdAt),
    updatedAt: isoTime(d.updatedAt),
    deliveredAt: d.deliveredAt === null ? null : isoTime(d.deliveredAt),
    nextAttemptAt: d.status === "pending" ? isoTime(d.nextAt) : null,
  };
}

notificationRoutes.put("/", async (c) => {
  const { json } = await readJsonBody(c.req.raw, MAX_BODY_BYTES);
  const workspace = c.get("workspace");
  const vars = c.env as unknown as Record<string, unknown>;
  const settings = parseNotificationSettings(json, c.env.OUTBOUND_ALLOWLIST);
  // The secret is read by (this workspace, name): another workspace's secret of that name is never seen.
  await checkSecretOnRecord(c.env.DB, vars, workspace, settings.secret, async (row) => {
    try {
      return await openSecret(await keyringFrom(vars), workspace, settings.secret, row);
    } catch {
      return null; // not openable here (no master key): the delivery says so on record
    }
  });
  const stored = await putNotificationSettings(c.env.DB, workspace, settings, nowOf(c.env));
  return c.json(present(stored));
});

notificationRoutes.get("/", async (c) => {
  const stored = await getNotificationSettings(c.env.DB, c.get("workspace"));
  if (stored === null) throw commonProblems.notFound("A notification setting");
  return c.json(present(stored));
});

notificationRoutes.delete("/", async (c) => {
  if (!(await deleteNotificationSettings(c.env.DB, c.get("workspace")))) throw commonProblems.notFound("A notification setting");
  return c.body(null, 204);
});

notificationRoutes.get("/deliveries", async (c) => {
  const q = parseQuery(DeliveryListQuery, c.req.query());
  const items = await listDeliveries(c.env.DB, c.get("workspace"), q.limit, q.before === undefined ? null : Number(q.before));
  const last = items.at(-1);
  return c.json({ items: items.map(presentDelivery), nextBefore: items.length === q.limit && last ? String(last.id) : null });
});
