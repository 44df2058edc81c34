/**
 * The OpenAPI operations of notifications (SPEC section 18, docs/notifications.md): the
 * workspace's setting and the record of its deliveries (src/http/routes/notifications.ts).
 */
import { z } from "zod";
import { area, AUTH, DELETED, JSON_BODY, json, merge, op } from "../operation";
import { NOTIFICATION_EVENTS } from "../../../notifications/events";
import { MAX_STUCK_AFTER_SECONDS, MIN_STUCK_AFTER_SECONDS } from "../../../notifications/settings";

const Time = z.iso.datetime().describe("ISO-8601 UTC");
const Event = z.enum(NOTIFICATION_EVENTS);

export const NotificationSettingsBody = z.strictObject({
  url: z.string().url().describe("where the signed POSTs go: an http(s) URL whose host is on OUTBOUND_ALLOWLIST"),
  secret: z
    .string()
    .describe(
      "the NAME of a workspace secret (`PUT /v1/secrets/NAME`) holding the Standard Webhooks `whsec_…` secret; " +
        "a secret sent here in clear is refused",
    ),
  events: z.array(Event).min(1).describe("the events wanted"),
  stuckAfterSeconds: z
    .int()
    .min(MIN_STUCK_AFTER_SECONDS)
    .max(MAX_STUCK_AFTER_SECONDS)
    .optional()
    .describe("with `execution.stuck` (required then): how long a step may wait unchanged before it is reported, once per wait"),
});

export const NotificationSettings = z.object({
  url: z.string(),
  secret: z.string().describe("the secret's NAME (never its value)"),
  events: z.array(Event),
  stuckAfterSeconds: z.int().nullable(),
  createdAt: Time,
  updatedAt: Time,
});

export const NotificationDelivery = z.object({
  id: z.int(),
  event: Event,
  webhookId: z.string().describe("the `webhook-id` header: the same on every attempt of this notification"),
  executionId: z.string(),
  status: z.enum(["pending", "delivered", "failed"]).describe("failed: given up (attempts used, setting deleted, URL off the allowlist)"),
  attempts: z.int(),
  lastStatus: z.int().nullable().describe("the HTTP status of the last answer; null: no answer (not sent, or no response)"),
  lastAnswer: z.string().nullable().describe("the start of the last answer's body, or why nothing was sent"),
  createdAt: Time,
  updatedAt: Time,
  deliveredAt: Time.nullable(),
  nextAttemptAt: Time.nullable().describe("pending: when the next attempt is due"),
});

export const DeliveryListQuery = z.object({
  limit: z.int().min(1).max(100).default(50).describe("at most this many, newest first"),
  before: z
    .string()
    .regex(/^\d{1,15}$/)
    .optional()
    .describe("page on: the `id` of the last delivery of the previous page"),
});

export const NOTIFICATION_OPERATIONS = area("notifications", [
  op("put", "/v1/notifications", "putNotifications", {
    summary: "Set where and which failures are notified (signed Standard Webhooks POSTs)",
    body: { schema: NotificationSettingsBody, required: true, description: "`{ url, secret, events, stuckAfterSeconds? }`" },
    answers: { 200: json("saved", NotificationSettings) },
    problems: merge(AUTH, JSON_BODY, { 422: ["notification-setting-invalid"] }),
  }),
  op("get", "/v1/notifications", "getNotifications", {
    summary: "The workspace's notification setting",
    answers: { 200: json("the setting", NotificationSettings) },
    problems: merge(AUTH, { 404: ["not-found"] }),
  }),
  op("delete", "/v1/notifications", "deleteNotifications", {
    summary: "Stop notifying (pending deliveries are given up)",
    answers: DELETED,
    problems: merge(AUTH, { 404: ["not-found"] }),
  }),
  op("get", "/v1/notifications/deliveries", "listNotificationDeliveries", {
    summary: "The notifications on record: event, webhook-id, attempts, status and the last answer, newest first",
    query: DeliveryListQuery,
    answers: { 200: json("the deliveries", z.object({ items: z.array(NotificationDelivery), nextBefore: z.string().nullable() })) },
    problems: merge(AUTH, { 400: ["invalid-query"] }),
  }),
]);
