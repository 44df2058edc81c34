/**
 * The retention guard, against a destination that really forgets: the demo's `/forgetful/charges`
 * is its payments API behind the real Idempotency-Key middleware with a 120 s retention (on the
 * harness's clock), so a key re-sent after that charges again. Every test here would see that
 * second charge without the guard.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { createDemoTables } from "../helpers/demo-tables";
import { FORGETFUL_RETENTION_MS } from "../../demo/src/env";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { KEY_MAY_BE_FORGOTTEN_MARK, retryFailedStep } from "../../src/ledger";
import { readTrace } from "../../src/steps/trace";
import {
  callApp,
  chargeWorkflow,
  demoHarness,
  DEST,
  executionStatus,
  harness,
  seedWorkflow,
  stepsOf,
  unique,
  type Harness,
} from "./helpers";

const WS = "dev"; // dev-token's workspace: the operator routes are called with it
const RETENTION_MS = FORGETFUL_RETENTION_MS;

const migration = import.meta.glob<string>("../../migrations/0008_*.sql", { query: "?raw", import: "default", eager: true });

beforeAll(createDemoTables);

/** The harness, with /forgetful/* served by the demo in-process on the harness's clock. */
const setup = demoHarness;

/** entry → charge (the forgetful payments API, its 120 s retention declared) → done. */
const forgetfulWorkflow = (): WorkflowDefinitionInput =>
  chargeWorkflow(unique("wf"), {
    url: `${DEST}/forgetful/charges`,
    headers: { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" },
    idempotencyKey: { value: "= $idempotencyKey('charge', payload.order.id)", retention: "120s" },
    timeoutMs: 5_000,
    retry: { maxAttempts: 3, backoff: "exponential", initialDelayMs: 1000, maxDelayMs: 10_000, inProgressBudgetMs: 1_000 },
  });

async function charges(order: string): Promise<number> {
  const row = await env.DB.prepare("SELECT count(*) AS n FROM charges WHERE order_id = ?1").bind(order).first<{ n: number }>();
  return row!.n;
}

async function keySends(key: string) {
  const { results } = await env.DB.prepare(
    "SELECT workspace, destination, first_sent_at, counted_from, execution_id FROM destination_key_sends WHERE idempotency_key = ?1",
  )
    .bind(key)
    .all();
  return results;
}

/** One completed execution: one charge, its key's first send on record at the harness's clock. */
async function chargedOnce(h: Harness) {
  const order = unique("O");
  const payload = { order: { id: order, total: 12 } };
  const workflow = await seedWorkflow(WS, forgetfulWorkflow());
  const sentAt = h.clock.now();
  const id = await h.start(workflow, payload);
  await h.drain();
  expect(await executionStatus(id)).toBe("COMPLETED");
  expect(await charges(order)).toBe(1);
  const key = (await stepsOf(id)).charge!.idempotency_key!;
  return { order, payload, workflow, id, key, sentAt };
}

describe("the retention guard", () => {
  it("records the key's first send per workspace and destination; the trace shows it with the deadline", async () => {
    const h = setup();
    const { id, key, sentAt } = await chargedOnce(h);
    expect(await keySends(key)).toEqual([
      { workspace: WS, destination: DEST, first_sent_at: sentAt, counted_from: sentAt, execution_id: id },
    ]);
    const trace = (await readTrace(env.DB, WS, id))!;
    expect(trace.steps.find((s) => s.vertexId === "charge")!.destinationKey).toEqual({
      value: key,
      header: "Idempotency-Key",
      profile: null,
      maxLength: 255,
      alphabet: "printable-ascii",
      retentionMs: RETENTION_MS,
      destination: DEST,
      firstSentAt: new Date(sentAt).toISOString(),
      acknowledgedAt: null,
      retentionDeadline: new Date(sentAt + RETENTION_MS).toISOString(),
    });
  });

  it("a takeover after the retention refuses to re-send the key: FAILED with when and where it was first sent, one charge", async () => {
    const h = setup({});
    const order = unique("T");
    const workflow = await seedWorkflow(WS, forgetfulWorkflow());
    const id = await h.start(workflow, { order: { id: order, total: 5 } });
    const sentAt = h.clock.now();
    const [first] = h.queue.take();
    // The charge is made, then the worker dies before it can settle: the step stays EXECUTING.
    await h.deliver([first!.body], {
      afterRun: () => {
        throw new Error("worker died");
      },
    });
    expect(await charges(order)).toBe(1);
    h.clock.advance(RETENTION_MS + 10_000); // the lease expired long ago, and the destination forgot the key
    await h.deliver([first!.body]);
    const step = (await stepsOf(id)).charge!;
    expect(step).toMatchObject({ state: "FAILED", epoch: 2 });
    expect(step.error).toContain(KEY_MAY_BE_FORGOTTEN_MARK);
    expect(step.error).toBe(
      `${KEY_MAY_BE_FORGOTTEN_MARK} (gateway charge): key ${JSON.stringify(step.idempotency_key)} was first sent to ${DEST} at ` +
        `${new Date(sentAt).toISOString()}, and the destination remembers keys for 2 minutes, until ` +
        `${new Date(sentAt + RETENTION_MS).toISOString()}. Sent now, it could be taken as a new request and, for a payment, ` +
        `charge again. Check at ${DEST} whether the first request took effect (look it up by this key or by the business id). ` +
        'If it did not, retry this step with the body {"acknowledgeForgottenKey": true} to send the key once more; ' +
        "if it did, leave the step FAILED. Nothing was sent; not retried",
    );
    expect(h.dest.requests).toHaveLength(1);
    expect(await charges(order)).toBe(1);
    expect(await executionStatus(id)).toBe("FAILED");
  });

  it("counts per workspace: another workspace sending the same key after the retention is not refused", async () => {
    const h = setup();
    const { payload, key } = await chargedOnce(h);
    h.clock.advance(RETENTION_MS + 10_000);
    // Same business data, so the same key, from a workspace that never sent it.
    const other = await h.start(await seedWorkflow("steps-retention-other", forgetfulWorkflow()), payload);
    await h.drain();
    expect(await executionStatus(other)).toBe("COMPLETED");
    expect((await stepsOf(other)).charge!.idempotency_key).toBe(key);
    expect((await keySends(key)).map((r) => r.workspace).sort()).toEqual([WS, "steps-retention-other"]);
  });

  it("a takeover reads its own workspace's key sends: another workspace's older first send of the same key refuses nothing", async () => {
    const h = setup();
    const order = unique("W");
    const payload = { order: { id: order, total: 7 } };
    // `steps-retention-other` sends the key first. It sorts after `dev`, so a lookup by key alone
    // would find its row last, and its old send would pass for dev's.
    const first = await h.start(await seedWorkflow("steps-retention-other", forgetfulWorkflow()), payload);
    const otherSentAt = h.clock.now();
    await h.drain();
    expect(await executionStatus(first)).toBe("COMPLETED");
    h.clock.advance(RETENTION_MS + 10_000);
    // The same key from `dev`, long after: its first attempt sends, then the worker dies before its settle.
    const id = await h.start(await seedWorkflow(WS, forgetfulWorkflow()), payload);
    const sentAt = h.clock.now();
    const [message] = h.queue.take();
    await h.deliver([message!.body], {
      afterRun: () => {
        throw new Error("worker died");
      },
    });
    // The takeover, well within dev's own retention (its key sends come with the claim).
    h.clock.advance(40_000);
    await h.deliver([message!.body]);
    const step = (await stepsOf(id)).charge!;
    expect(step.error).toBeNull();
    expect(step).toMatchObject({ state: "COMPLETED", epoch: 2 });
    // The destination had forgotten the other workspace's send, and replayed dev's own.
    expect(await charges(order)).toBe(2);
    const shown = async (workspace: string, executionId: string) =>
      (await readTrace(env.DB, workspace, executionId))!.steps.find((s) => s.vertexId === "charge")!.destinationKey!.firstSentAt;
    expect(await shown(WS, id)).toBe(new Date(sentAt).toISOString());
    expect(await shown("steps-retention-other", first)).toBe(new Date(otherSentAt).toISOString());
  });

  it("stops a tenth of the retention (at most a minute) before its end, and sends just before that", async () => {
    for (const [late, state] of [
      [-1, "COMPLETED"],
      [0, "FAILED"],
    ] as const) {
      const h = setup();
      const order = unique("M");
      const id = await h.start(await seedWorkflow(WS, forgetfulWorkflow()), { order: { id: order, total: 5 } });
      const [first] = h.queue.take();
      await h.deliver([first!.body], {
        afterRun: () => {
          throw new Error("worker died");
        },
      });
      // 120 s retention: the margin is 12 s, so the last moment to send is 108 s after the first.
      h.clock.advance(RETENTION_MS - RETENTION_MS / 10 + late);
      await h.deliver([first!.body]);
      expect((await stepsOf(id)).charge!.state).toBe(state);
      expect(await charges(order)).toBe(1); // within the retention the destination replays its charge
    }
  });

  it("a start over within the retention re-sends the key and the destination replays: one charge", async () => {
    const h = setup();
    const { order, payload, workflow, id, key } = await chargedOnce(h);
    h.clock.advance(60_000);
    const again = (await h.startOver(workflow, payload, id)).executionId;
    await h.drain();
    expect(await executionStatus(again)).toBe("COMPLETED");
    expect((await stepsOf(again)).charge!.idempotency_key).toBe(key);
    expect(await charges(order)).toBe(1);
    expect(await keySends(key)).toHaveLength(1); // the first send stays the first execution's
  });

  it("a start over after the retention is refused; the retry asks for an acknowledgement, and acknowledged charges once more", async () => {
    // The harness clock runs 200 s behind the wall clock, which the operator route uses.
    const h = setup({ clockAt: Date.now() - 200_000 });
    const { order, payload, workflow, id, key, sentAt } = await chargedOnce(h);
    h.clock.advance(RETENTION_MS + 10_000);
    const again = (await h.startOver(workflow, payload, id)).executionId;
    await h.drain();
    const refused = (await stepsOf(again)).charge!;
    expect(refused).toMatchObject({ state: "FAILED", idempotency_key: key });
    expect(refused.error).toContain(`was first sent to ${DEST} at ${new Date(sentAt).toISOString()}`);
    expect(await charges(order)).toBe(1);

    const retry = `/v1/executions/${again}/steps/charge/retry`;
    const unacknowledged = await callApp(h, "POST", retry, { key: unique("op") });
    expect(unacknowledged.status).toBe(409);
    expect(await unacknowledged.json()).toMatchObject({ code: "destination-key-may-be-forgotten" });
    expect((await stepsOf(again)).charge!.state).toBe("FAILED");

    const acknowledged = await callApp(h, "POST", retry, { key: unique("op"), body: { acknowledgeForgottenKey: true } });
    expect(acknowledged.status).toBe(202);
    expect(await acknowledged.json()).toMatchObject({ state: "DISPATCHED", acknowledgedForgottenKey: true });
    await h.drain();
    expect(await executionStatus(again)).toBe("COMPLETED");
    // The destination had forgotten the key: the acknowledged re-send is a second charge, and says so.
    expect(await charges(order)).toBe(2);
    const trace = (await readTrace(env.DB, WS, again))!;
    const charge = trace.steps.find((s) => s.vertexId === "charge")!;
    const ack = charge.events.find((e) => e.type === "operator_retry")!;
    expect(ack.detail).toMatch(
      new RegExp(`^acknowledged that the destination may have forgotten key ${key}; it is sent again and its retention counts from now`),
    );
    expect(charge.destinationKey).toMatchObject({ firstSentAt: new Date(sentAt).toISOString(), acknowledgedAt: ack.at });
    const [send] = await keySends(key);
    expect(send).toMatchObject({ first_sent_at: sentAt, execution_id: id });
    expect(send!.counted_from).toBe(Date.parse(ack.at!));
  });

  it("an acknowledgement does not move the retention of a step the guard did not refuse", async () => {
    // The destination is down for all three attempts: FAILED for another reason than the guard.
    const h = harness({ fetch: async () => new Response("{}", { status: 503, headers: { "content-type": "application/json" } }) });
    const id = await h.start(await seedWorkflow(WS, forgetfulWorkflow()), { order: { id: unique("N"), total: 3 } });
    await h.drain();
    const step = (await stepsOf(id)).charge!;
    expect(step).toMatchObject({ state: "FAILED", attempt: 3 });
    const before = await keySends(step.idempotency_key!);
    const result = await retryFailedStep(env.DB, WS, { executionId: id, vertexId: "charge" }, h.clock.now() + 50_000, {
      acknowledgeForgottenKey: true,
    });
    // Moving it would let a later re-send through after the destination forgot the key.
    expect(result).toEqual({ retried: true, acknowledged: false });
    expect(await keySends(step.idempotency_key!)).toEqual(before);
  });

  it("a retry body other than {acknowledgeForgottenKey: boolean} is a 400 problem, nothing changed", async () => {
    const h = setup();
    const { id } = await chargedOnce(h);
    for (const body of ["[1]", { force: true }, { acknowledgeForgottenKey: "yes" }, "{"]) {
      const response = await callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key: unique("op"), body });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { code: string }).code).toMatch(/^(invalid-retry-body|malformed-json)$/);
    }
    expect((await stepsOf(id)).charge!.state).toBe("COMPLETED");
  });

  it("a key persisted before sends were recorded is dated from its step's creation, so the guard still refuses", async () => {
    const h = setup();
    const order = unique("L");
    const id = await h.start(await seedWorkflow(WS, forgetfulWorkflow()), { order: { id: order, total: 5 } });
    const createdAt = h.clock.now();
    const [first] = h.queue.take();
    h.clock.advance(30_000); // the first attempt runs a while after the step was dispatched
    await h.deliver([first!.body], {
      afterRun: () => {
        throw new Error("worker died");
      },
    });
    const key = (await stepsOf(id)).charge!.idempotency_key!;
    await env.DB.prepare("DELETE FROM destination_key_sends WHERE idempotency_key = ?1").bind(key).run(); // as before 0008
    h.clock.advance(RETENTION_MS - 30_000); // 120 s after the step's creation, 90 s after the real send
    await h.deliver([first!.body]);
    const step = (await stepsOf(id)).charge!;
    expect(step.state).toBe("FAILED");
    expect(step.error).toContain(`first sent to ${DEST} at ${new Date(createdAt).toISOString()}`);
    expect(await keySends(key)).toMatchObject([{ first_sent_at: createdAt }]);
    expect(await charges(order)).toBe(1);
  });

  it("migration 0008 dates the keys of existing steps from their creation, at the origin of their last request", async () => {
    const h = setup();
    const { id, key, sentAt } = await chargedOnce(h);
    const created = (await env.DB.prepare("SELECT created_at FROM steps WHERE execution_id = ?1 AND vertex_id = 'charge'")
      .bind(id)
      .first<{ created_at: number }>())!.created_at;
    await env.DB.prepare("DELETE FROM destination_key_sends").run();
    const backfill = Object.values(migration)[0]!.slice(Object.values(migration)[0]!.indexOf("INSERT OR IGNORE"));
    await env.DB.prepare(backfill.replace(/--.*$/gm, "")).run();
    expect(await keySends(key)).toEqual([
      { workspace: WS, destination: DEST, first_sent_at: created, counted_from: created, execution_id: id },
    ]);
    expect(created).toBeLessThanOrEqual(sentAt);
  });
});
