/**
 * Notifications (docs/notifications.md) on real D1: the outbox row is written by the failure's own
 * settle batch, delivered through the queue's notification messages, signed as Standard Webhooks
 * under a webhook-id stable per (execution, event), retried with back-off, seen once by a receiver
 * that deduplicates (the demo's), and never signed with another workspace's setting or secret.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import { verifyStandardWebhook, webhookSecretKey } from "../../src/events/standard-webhooks";
import { handleQueueBatch } from "../../src/queue";
import { notificationsTask } from "../../src/notifications/cron";
import { deliverNotification, type NotifyDeps } from "../../src/notifications/deliver";
import { NOTIFICATION_MESSAGE_TYPE } from "../../src/notifications/messages";
import { notificationReceiverRoutes, DEMO_NOTIFICATION_SECRET } from "../../demo/src/notifications";
import { dbOf } from "../helpers/shards";
import { keyringFrom, sealSecret } from "../../src/secrets/crypto";
import { putSealedSecret } from "../../src/secrets/store";
import { putNotificationSettings } from "../../src/notifications/settings";
import { callApp, failedCharge, harness, type Harness } from "../steps/helpers";

beforeEach(() => {
  for (const level of ["log", "warn", "error"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

const RECEIVER = "http://localhost:8788/notifications";
const OTHER_SECRET = `whsec_${btoa("another-workspace-signing-key-32")}`;

async function api(method: string, path: string, token: string, body?: unknown) {
  const ctx = createExecutionContext();
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await app.fetch(
    new Request(`http://idemflow.test${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }),
    env,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: res.status, json: (await res.json().catch(() => null)) as Record<string, unknown> | null };
}

/** A secret of the workspace `neighbour`, sealed for it, on dev's shard (the same database dev reads). */
async function neighbourSecret(name: string, value: string): Promise<void> {
  const keyring = await keyringFrom(env as unknown as Record<string, unknown>);
  await putSealedSecret(dbOf(env, "dev"), "neighbour", name, await sealSecret(keyring, "neighbour", name, value), Date.now());
}

async function configure(token: string, secretName: string, secretValue: string, events = ["execution.failed"]) {
  expect((await api("PUT", `/v1/secrets/${secretName}`, token, { value: secretValue })).status).toBe(200);
  const put = await api("PUT", "/v1/notifications", token, { url: RECEIVER, secret: secretName, events });
  expect(put.status, JSON.stringify(put.json)).toBe(200);
}

/** The demo receiver in-process on the harness's clock, behind a fetch a test can script. */
function receiver(h: Harness, secret = DEMO_NOTIFICATION_SECRET) {
  const routes = notificationReceiverRoutes({ now: h.clock.now, secret });
  const requests: Request[] = [];
  const script: Array<"500" | "lost"> = [];
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const request = new Request(input as RequestInfo, init);
    requests.push(request.clone());
    const step = script.shift();
    if (step === "500") return new Response("down for maintenance", { status: 500 });
    const url = new URL(request.url);
    const answer = await routes.fetch(new Request(`http://demo${url.pathname.replace("/notifications", "") || "/"}`, request), env);
    if (step === "lost") throw new Error("connection reset (the receiver had answered)");
    return answer;
  };
  const record = async () =>
    (await (await routes.fetch(new Request("http://demo/"), env)).json()) as {
      items: Array<{ webhookId: string; deliveries: number; type: string }>;
      unique: number;
      duplicates: number;
    };
  return { fetch, requests, script, record };
}

function deps(h: Harness, fetch: typeof globalThis.fetch, workspace = "dev"): NotifyDeps {
  return { db: dbOf(env, workspace), env: env as unknown as Record<string, unknown>, fetch, now: h.clock.now, queue: h.queue };
}

interface OutboxRow {
  id: number;
  workspace: string;
  event: string;
  webhook_id: string;
  status: string;
  attempts: number;
  execution_id: string;
}

async function outboxOf(executionId: string, workspace = "dev"): Promise<OutboxRow[]> {
  const { results } = await dbOf(env, workspace)
    .prepare("SELECT * FROM notification_outbox WHERE execution_id = ?1 ORDER BY id")
    .bind(executionId)
    .all<OutboxRow>();
  return results;
}

/** The notification messages the harness's queue holds (taken out of it), as outbox ids. */
function takeNotificationMessages(h: Harness): number[] {
  const all = h.queue.take();
  const mine = all.filter((m) => (m.body as unknown as { type?: string }).type === NOTIFICATION_MESSAGE_TYPE);
  h.queue.pending.push(...all.filter((m) => !mine.includes(m)));
  return mine.map((m) => (m.body as unknown as { id: number }).id);
}

/**
 * A charge execution of `workspace` failed for good, with the notification messages its failure
 * sent held back (the harness's drain would hand them to the step consumer): their outbox ids.
 */
async function failed(h: Harness, workspace = "dev"): Promise<{ id: string; messages: number[] }> {
  const send = h.queue.sendBatch.bind(h.queue);
  const messages: number[] = [];
  h.queue.sendBatch = async (batch, options) => {
    const rest = [...batch].filter((m) => {
      const body = m.body as unknown as { type?: string; id: number };
      if (body.type !== NOTIFICATION_MESSAGE_TYPE) return true;
      messages.push(body.id);
      return false;
    });
    if (rest.length > 0) await send(rest, options);
  };
  const { id } = await failedCharge(h, workspace);
  h.queue.sendBatch = send;
  return { id, messages };
}

describe("PUT /v1/notifications refuses bad input with a pointer, saving nothing", () => {
  it.each([
    [
      "a url not on the allowlist",
      { url: "https://hooks.example.com/x", secret: "N", events: ["execution.failed"] },
      "/url",
      "OUTBOUND_ALLOWLIST",
    ],
    [
      "a secret given in clear",
      { url: RECEIVER, secret: DEMO_NOTIFICATION_SECRET, events: ["execution.failed"] },
      "/secret",
      "never the secret itself",
    ],
    [
      "an unknown event",
      { url: RECEIVER, secret: "N", events: ["execution.failed", "execution.exploded"] },
      "/events/1",
      "execution.exploded",
    ],
    [
      "a secret the workspace does not hold",
      { url: RECEIVER, secret: "NOT_STORED", events: ["execution.failed"] },
      "/secret",
      "no secret NOT_STORED",
    ],
    [
      "execution.stuck without its threshold",
      { url: RECEIVER, secret: "N", events: ["execution.stuck"] },
      "/stuckAfterSeconds",
      "stuckAfterSeconds",
    ],
  ])("%s", async (_what, body, pointer, detail) => {
    await api("PUT", "/v1/secrets/N", "other-token", { value: DEMO_NOTIFICATION_SECRET });
    const res = await api("PUT", "/v1/notifications", "other-token", body);
    expect(res.status).toBe(422);
    expect(res.json).toMatchObject({ code: "notification-setting-invalid", pointer, detail: expect.stringContaining(detail) });
    expect(JSON.stringify(res.json)).not.toContain(DEMO_NOTIFICATION_SECRET);
    expect((await api("GET", "/v1/notifications", "other-token")).status).toBe(404);
  });

  it("names only a secret of its own workspace: another workspace's secret of that name (same shard) is refused", async () => {
    await neighbourSecret("ONLY_NEIGHBOUR_HOLDS", DEMO_NOTIFICATION_SECRET);
    const res = await api("PUT", "/v1/notifications", "dev-token", {
      url: RECEIVER,
      secret: "ONLY_NEIGHBOUR_HOLDS",
      events: ["execution.failed"],
    });
    expect(res.status).toBe(422);
    expect(res.json).toMatchObject({ pointer: "/secret", detail: expect.stringContaining("no secret ONLY_NEIGHBOUR_HOLDS") });
  });
});

describe("execution.failed", () => {
  it("is written by the failure's own batch and delivered signed; a crash after the failure (message lost) still delivers", async () => {
    await configure("dev-token", "NOTIFY_DEV", DEMO_NOTIFICATION_SECRET);
    const h = harness({}, { workspace: "dev" });
    const r = receiver(h);
    const { id, messages } = await failed(h);
    // The settle batch that failed the execution wrote the row (status FAILED and the row together).
    const rows = await outboxOf(id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ event: "execution.failed", status: "pending", webhook_id: `idemflow.execution.failed.${id}` });
    // The crash: the message sent after the commit is lost (dropped here). The cron finds the row and re-sends it.
    expect(messages).toEqual([rows[0]!.id]);
    h.clock.advance(61_000);
    const report = await notificationsTask.run(
      { ...env, DB: dbOf(env, "dev"), QUEUE: h.queue } as unknown as Env,
      {
        cron: "* * * * *",
        scheduledTime: h.clock.now(),
      },
      createExecutionContext(),
    );
    expect(report.resent).toBe(1);
    const [resent] = takeNotificationMessages(h);
    expect(await deliverNotification(deps(h, r.fetch), resent!)).toBe("delivered");
    const record = await r.record();
    expect(record.items).toEqual([
      expect.objectContaining({ webhookId: `idemflow.execution.failed.${id}`, type: "execution.failed", deliveries: 1 }),
    ]);
    // The signature verifies with the reference algorithm (the engine's own verifier).
    const sent = r.requests[0]!;
    const raw = new Uint8Array(await sent.arrayBuffer());
    const verdict = await verifyStandardWebhook({
      key: webhookSecretKey(DEMO_NOTIFICATION_SECRET)!,
      headers: sent.headers,
      raw,
      nowMs: h.clock.now(),
      toleranceSeconds: 60,
    });
    expect(verdict).toEqual({ ok: true, id: `idemflow.execution.failed.${id}`, timestamp: String(Math.floor(h.clock.now() / 1000)) });
    expect(JSON.parse(new TextDecoder().decode(raw))).toMatchObject({
      type: "execution.failed",
      data: { executionId: id, status: "FAILED", failedStep: "charge" },
    });
    const deliveries = await api("GET", "/v1/notifications/deliveries", "dev-token");
    expect(deliveries.json!.items).toEqual(
      expect.arrayContaining([expect.objectContaining({ webhookId: `idemflow.execution.failed.${id}`, status: "delivered", attempts: 1 })]),
    );
  });

  it("a delivery answered 500 is retried after its back-off with the same webhook-id", async () => {
    await configure("dev-token", "NOTIFY_DEV", DEMO_NOTIFICATION_SECRET);
    const h = harness({}, { workspace: "dev" });
    const r = receiver(h);
    const {
      id,
      messages: [row],
    } = await failed(h);
    r.script.push("500");
    expect(await deliverNotification(deps(h, r.fetch), row!)).toBe("retrying");
    // Not due yet: a message arriving early claims nothing.
    expect(await deliverNotification(deps(h, r.fetch), row!)).toBe("skipped");
    const [again] = h.queue.pending.filter((m) => (m.body as unknown as { type?: string }).type === NOTIFICATION_MESSAGE_TYPE);
    expect(again!.dueAt - h.clock.now()).toBe(30_000);
    h.clock.advance(30_000);
    expect(await deliverNotification(deps(h, r.fetch), row!)).toBe("delivered");
    expect(r.requests.map((q) => q.headers.get("webhook-id"))).toEqual([
      `idemflow.execution.failed.${id}`,
      `idemflow.execution.failed.${id}`,
    ]);
    const [stored] = await outboxOf(id);
    expect(stored).toMatchObject({ status: "delivered", attempts: 2 });
    const deliveries = await api("GET", "/v1/notifications/deliveries", "dev-token");
    expect(deliveries.json!.items).toEqual(
      expect.arrayContaining([expect.objectContaining({ webhookId: `idemflow.execution.failed.${id}`, attempts: 2, lastStatus: 200 })]),
    );
  });

  it("a notification delivered twice (the receiver's answer lost) is seen once by the receiver: one webhook-id", async () => {
    await configure("dev-token", "NOTIFY_DEV", DEMO_NOTIFICATION_SECRET);
    const h = harness({}, { workspace: "dev" });
    const r = receiver(h);
    const {
      id,
      messages: [row],
    } = await failed(h);
    r.script.push("lost");
    expect(await deliverNotification(deps(h, r.fetch), row!)).toBe("retrying");
    h.clock.advance(30_000);
    expect(await deliverNotification(deps(h, r.fetch), row!)).toBe("delivered");
    const record = await r.record();
    const mine = record.items.filter((i) => i.webhookId === `idemflow.execution.failed.${id}`);
    expect(mine).toEqual([expect.objectContaining({ deliveries: 2 })]);
    expect(record.unique).toBe(1);
    expect(record.duplicates).toBe(1);
  });

  it("another workspace's setting and secret are never used; a workspace without a setting gets no row", async () => {
    // `neighbour`, on dev's own shard, wants failures, signed with its own secret under the same NAME dev uses.
    await neighbourSecret("NOTIFY_SHARED", OTHER_SECRET);
    const setting = { url: RECEIVER, secret: "NOTIFY_SHARED", events: ["execution.failed" as const], stuckAfterMs: null };
    await putNotificationSettings(dbOf(env, "dev"), "neighbour", setting, Date.now());
    await api("DELETE", "/v1/notifications", "dev-token");
    const h = harness({}, { workspace: "dev" });
    const { id: quiet, messages: none } = await failed(h);
    expect(await outboxOf(quiet)).toEqual([]);
    expect(none).toEqual([]);
    // dev names the same secret NAME, holding its own value: the notification is signed with dev's.
    await configure("dev-token", "NOTIFY_SHARED", DEMO_NOTIFICATION_SECRET);
    const r = receiver(h);
    const {
      id,
      messages: [row],
    } = await failed(h);
    expect(await deliverNotification(deps(h, r.fetch), row!)).toBe("delivered");
    const sent = r.requests[0]!;
    const raw = new Uint8Array(await sent.arrayBuffer());
    const withOther = await verifyStandardWebhook({
      key: webhookSecretKey(OTHER_SECRET)!,
      headers: sent.headers,
      raw,
      nowMs: h.clock.now(),
      toleranceSeconds: 60,
    });
    expect(withOther.ok).toBe(false);
    expect(sent.headers.get("webhook-id")).toBe(`idemflow.execution.failed.${id}`);
    const { results: neighbours } = await dbOf(env, "dev").prepare("SELECT * FROM notification_outbox WHERE workspace = 'neighbour'").all();
    expect(neighbours).toEqual([]);
  });
});

describe("the queue routes a body by its type", () => {
  it("a notification message is delivered; an unknown type is acked as poison, never run as a step", async () => {
    await configure("dev-token", "NOTIFY_DEV", DEMO_NOTIFICATION_SECRET);
    const h = harness({}, { workspace: "dev" });
    const {
      messages: [row],
    } = await failed(h);
    const r = receiver(h);
    const batch = createMessageBatch<unknown>("idemflow-steps", [
      { id: "n1", timestamp: new Date(), attempts: 1, body: { type: NOTIFICATION_MESSAGE_TYPE, id: row, shard: 0 } },
      { id: "u1", timestamp: new Date(), attempts: 1, body: { type: "carrier-pigeon", executionId: "x", vertexId: "y", shard: 0 } },
    ]);
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const ctx = createExecutionContext();
    const { withOutboundFetch } = await import("../../src/lib/outbound-fetch");
    const { withClock } = await import("../../src/lib/clock");
    await handleQueueBatch(batch, withClock(withOutboundFetch(env, r.fetch), h.clock.now) as Env, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks.sort()).toEqual(["n1", "u1"]);
    expect((await r.record()).unique).toBe(1);
    expect(errors.mock.calls.flat().join("\n")).toContain("carrier-pigeon");
  });
});

describe("callApp stays usable", () => {
  it("GET /v1/notifications answers the setting", async () => {
    await configure("dev-token", "NOTIFY_DEV", DEMO_NOTIFICATION_SECRET);
    const h = harness({}, { workspace: "dev" });
    const res = await callApp(h, "GET", "/v1/notifications");
    expect(await res.json()).toMatchObject({ url: RECEIVER, secret: "NOTIFY_DEV", events: ["execution.failed"] });
  });
});
