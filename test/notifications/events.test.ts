/**
 * The other three notification events on real D1 (docs/notifications.md "The events"):
 * `step.retention_refused` where the retention guard refuses, `execution.stuck` from the cron's
 * bounded scan (once per wait), and `execution.compensation_failed` through the one function
 * compensation calls.
 */
import { createExecutionContext, env } from "cloudflare:test";
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import { compensationFailedNotification } from "../../src/notifications";
import { notificationsTask } from "../../src/notifications/cron";
import { DEMO_NOTIFICATION_SECRET } from "../../demo/src/notifications";
import { FORGETFUL_RETENTION_MS } from "../../demo/src/env";
import { createDemoTables } from "../helpers/demo-tables";
import { chargeWorkflow, demoHarness, DEST, failedCharge, harness, seedWorkflow, unique, type Harness } from "../steps/helpers";

beforeAll(createDemoTables);
beforeEach(() => {
  for (const level of ["log", "warn", "error"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

async function configure(events: string[], stuckAfterSeconds?: number) {
  const call = async (method: string, path: string, body: unknown) => {
    const ctx = createExecutionContext();
    const res = await app.fetch(
      new Request(`http://idemflow.test${path}`, {
        method,
        headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
        body: JSON.stringify(body),
      }),
      env,
      ctx,
    );
    return res;
  };
  expect((await call("PUT", "/v1/secrets/NOTIFY", { value: DEMO_NOTIFICATION_SECRET })).status).toBe(200);
  const res = await call("PUT", "/v1/notifications", { url: `${DEST}/notifications`, secret: "NOTIFY", events, stuckAfterSeconds });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function rowsOf(executionId: string) {
  const { results } = await env.DB.prepare(
    "SELECT event, subject, webhook_id, status FROM notification_outbox WHERE execution_id = ?1 ORDER BY id",
  )
    .bind(executionId)
    .all<{ event: string; subject: string; webhook_id: string; status: string }>();
  return results;
}

const tick = (h: Harness) =>
  notificationsTask.run(
    { ...env, QUEUE: h.queue } as unknown as Env,
    { cron: "* * * * *", scheduledTime: h.clock.now() },
    createExecutionContext(),
  );

describe("step.retention_refused", () => {
  it("is written where the guard refuses, once per step, beside the execution's failure", async () => {
    await configure(["execution.failed", "step.retention_refused"]);
    const h = demoHarness();
    const workflow = await seedWorkflow(
      "dev",
      chargeWorkflow(unique("wf"), {
        url: `${DEST}/forgetful/charges`,
        headers: { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" },
        idempotencyKey: { value: "= $idempotencyKey('charge', payload.order.id)", retention: "120s" },
        timeoutMs: 5_000,
      }),
    );
    const id = await h.start(workflow, { order: { id: unique("T"), total: 5 } });
    const [first] = h.queue.take();
    await h.deliver([first!.body], {
      afterRun: () => {
        throw new Error("worker died");
      },
    });
    h.clock.advance(FORGETFUL_RETENTION_MS + 10_000);
    await h.deliver([first!.body]);
    expect(await rowsOf(id)).toEqual([
      {
        event: "step.retention_refused",
        subject: `${id}/charge`,
        webhook_id: `idemflow.step.retention_refused.${id}/charge`,
        status: "pending",
      },
      { event: "execution.failed", subject: id, webhook_id: `idemflow.execution.failed.${id}`, status: "pending" },
    ]);
  });
});

describe("execution.stuck", () => {
  it("reports a step waiting past the threshold once per wait, from the cron", async () => {
    await configure(["execution.stuck"], 60);
    const h = harness({}, { workspace: "dev" });
    const workflow = await seedWorkflow("dev", chargeWorkflow(unique("wf")));
    const id = await h.start(workflow, { order: { id: unique("S"), total: 5 } });
    h.queue.take(); // its message is lost: the charge waits DISPATCHED
    h.clock.advance(30_000);
    expect((await tick(h)).stuck).toBe(0);
    h.clock.advance(61_000);
    expect((await tick(h)).stuck).toBe(1);
    h.clock.advance(61_000);
    expect((await tick(h)).stuck).toBe(0); // the same wait: reported once
    const rows = await rowsOf(id);
    expect(rows).toEqual([
      { event: "execution.stuck", subject: `${id}/charge/0`, webhook_id: `idemflow.execution.stuck.${id}/charge/0`, status: "pending" },
    ]);
  });
});

describe("execution.compensation_failed", () => {
  it("compensationFailedNotification is one statement: one row per execution however often it runs, none when not wanted", async () => {
    const h = harness({}, { workspace: "dev" });
    await configure(["execution.failed"]);
    const { id: unwanted } = await failedCharge(h, "dev");
    await compensationFailedNotification(env.DB, unwanted, h.clock.now()).run();
    expect((await rowsOf(unwanted)).map((r) => r.event)).toEqual(["execution.failed"]);

    await configure(["execution.compensation_failed"]);
    const { id } = await failedCharge(h, "dev");
    const statement = () => compensationFailedNotification(env.DB, id, h.clock.now(), { vertexId: "charge" });
    const [written] = await env.DB.batch([statement(), statement()]);
    expect(written!.results).toHaveLength(1);
    expect(await rowsOf(id)).toEqual([
      {
        event: "execution.compensation_failed",
        subject: id,
        webhook_id: `idemflow.execution.compensation_failed.${id}`,
        status: "pending",
      },
    ]);
  });
});
