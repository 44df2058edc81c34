/**
 * Verify before every re-attempt (docs/definitions.md "Verify before re-attempting"), against the
 * demo's legacy order API (demo/src/legacy.ts: no key support) running in-process on the real D1,
 * its after-commit fault (demo/src/faults.ts) losing the answer of a write that committed.
 *
 * In front of the demo, `LegacyDemo` records every call and can answer one itself (a network
 * error, a 503, a 401) before it reaches the demo: the transient failures the demo cannot make.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { createDemoApp } from "../../demo/src/app";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { startWorkflowExecution } from "../../src/ingress/start";
import { retryFailedStep } from "../../src/ledger";
import type { StepMessage } from "../../src/steps/messages";
import legacySync from "../../workflows/legacy-sync.json";
import { countingD1 } from "../helpers/counting-d1";
import { createDemoTables } from "../helpers/demo-tables";
import { DEST, executionStatus, harness, seedWorkflow, stepsOf, unique, type Harness } from "./helpers";

const WS = "steps-verify";
const ORDERS = "/legacy/orders";

beforeAll(createDemoTables);

/** The demo app behind a recorder; `answer` makes the next matching call answer without reaching the demo. */
class LegacyDemo {
  private app = createDemoApp();
  calls: string[] = [];
  private scripted: Array<{ method: string; status: number }> = [];

  /** Status 0 is a network error. */
  answer(method: string, status: number, count = 1): void {
    for (let i = 0; i < count; i++) this.scripted.push({ method, status });
  }

  fetch: typeof fetch = async (input, init) => {
    const request = new Request(input as RequestInfo, init);
    this.calls.push(`${request.method} ${new URL(request.url).pathname}`);
    const i = this.scripted.findIndex((s) => s.method === request.method);
    if (i >= 0) {
      const { status } = this.scripted.splice(i, 1)[0]!;
      if (status === 0) throw new TypeError("Network connection lost.");
      return Response.json({ error: "scripted" }, { status });
    }
    return this.call(request);
  };

  /** Make the next write commit and then lose its answer (a 502 after the order exists). */
  async loseNextWriteAnswer(): Promise<void> {
    const arm = new Request(`${DEST}/faults`, { method: "POST", body: JSON.stringify({ path: ORDERS, method: "POST", count: 1 }) });
    expect((await this.call(arm)).status).toBe(201);
  }

  private async call(request: Request): Promise<Response> {
    const ctx = createExecutionContext();
    const response = await this.app.fetch(request, env, ctx);
    await waitOnExecutionContext(ctx);
    return response;
  }
}

/** The legacy system's rows for an order: what it actually wrote. */
async function ordersOf(externalId: string): Promise<number> {
  const row = await env.DB.prepare("SELECT count(*) AS n FROM legacy_orders WHERE external_id = ?1")
    .bind(externalId)
    .first<{ n: number }>();
  return row!.n;
}

/** entry → create (POST with a verify probe) → done (reads the create step's output). */
function createWorkflow(
  retry: Record<string, unknown> = { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000 },
): WorkflowDefinitionInput {
  return {
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "create",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${DEST}${ORDERS}`,
          body: "= { 'external_id': payload.order.id, 'total': payload.order.total }",
          verify: { url: `${DEST}${ORDERS}`, query: { external_id: "= payload.order.id" }, condition: "= $count(body.items) > 0" },
          retry,
        },
      },
      { id: "done", type: "TRANSFORM", config: { output: { verified: "= steps.create.verified", status: "= steps.create.status" } } },
    ],
    edges: [
      { from: "received", to: "create" },
      { from: "create", to: "done" },
    ],
  } as WorkflowDefinitionInput;
}

function setup(more: Parameters<typeof harness>[0] = {}): { h: Harness; legacy: LegacyDemo } {
  const legacy = new LegacyDemo();
  return { h: harness({ fetch: legacy.fetch, ...more }), legacy };
}

async function started(h: Harness, input: WorkflowDefinitionInput = createWorkflow()) {
  const order = unique("LO");
  const id = await h.start(await seedWorkflow(WS, input), { order: { id: order, total: 10 } });
  return { id, order };
}

interface Output {
  verified?: string;
  status: number;
  body: { items?: Array<{ externalId: string }> };
}

async function createStep(id: string) {
  const step = (await stepsOf(id)).create!;
  const { request } = (await env.DB.prepare("SELECT request FROM steps WHERE execution_id = ?1 AND vertex_id = 'create'")
    .bind(id)
    .first<{ request: string }>())!;
  return { ...step, output: JSON.parse(step.output ?? "null") as Output, request: JSON.parse(request) as { method: string; url: string } };
}

async function eventsOf(id: string): Promise<Array<{ type: string; detail: string }>> {
  const { results } = await env.DB.prepare(
    "SELECT type, detail FROM step_events WHERE execution_id = ?1 AND vertex_id = 'create' ORDER BY id",
  )
    .bind(id)
    .all<{ type: string; detail: string }>();
  return results;
}

/** The step found already done: completed with the probe's answer, marked, the order written once. */
async function expectVerifiedExisting(id: string, order: string, attempt: number): Promise<void> {
  const step = await createStep(id);
  expect(step.state).toBe("COMPLETED");
  expect(step.attempt).toBe(attempt);
  expect(step.output).toMatchObject({ verified: "existing", status: 200 });
  expect(step.output.body.items!.map((o) => o.externalId)).toEqual([order]);
  expect(step.request).toMatchObject({ method: "GET", url: `${DEST}${ORDERS}?external_id=${order}` });
  expect(JSON.parse((await stepsOf(id)).done!.output!)).toEqual({ verified: "existing", status: 200 });
  expect(await executionStatus(id)).toBe("COMPLETED");
  expect(await ordersOf(order)).toBe(1);
}

describe("verify before re-attempting a write to a destination without keys", () => {
  it("a write committed and its answer lost: the retry runs the probe, finds the order and writes nothing", async () => {
    const { h, legacy } = setup();
    const { id, order } = await started(h);
    await legacy.loseNextWriteAnswer();
    await h.drain();
    await expectVerifiedExisting(id, order, 2);
    // The first attempt wrote without asking; the retry asked and did not write.
    expect(legacy.calls).toEqual([`POST ${ORDERS}`, `GET ${ORDERS}`]);
    expect((await eventsOf(id)).map((e) => e.type)).toEqual(["attempt_failed"]);
  });

  it("the verified re-attempt costs the round trips of any later attempt: the claim batch and the settle batch", async () => {
    const counting = countingD1(env.DB);
    const { h, legacy } = setup({ db: counting.db });
    const { id, order } = await started(h);
    await legacy.loseNextWriteAnswer();
    const [first] = h.queue.take();
    await h.deliver([first!.body]);
    const [retry] = h.queue.take();
    h.clock.t = retry!.dueAt;
    counting.reset();
    await h.deliver([retry!.body]);
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch"]);
    expect((await createStep(id)).output.verified).toBe("existing");
    expect(await ordersOf(order)).toBe(1);
  });

  it("the example workflows/legacy-sync.json: read, write (answer lost), verified on the retry", async () => {
    const { h, legacy } = setup();
    const { id, order } = await started(h, { ...(legacySync as unknown as WorkflowDefinitionInput), id: unique("legacy-sync") });
    await legacy.loseNextWriteAnswer();
    await h.drain();
    const step = await createStep(id);
    expect(step).toMatchObject({ state: "COMPLETED", attempt: 2, output: { verified: "existing", status: 200 } });
    expect(legacy.calls).toEqual([`GET ${ORDERS}`, `POST ${ORDERS}`, `GET ${ORDERS}`]);
    expect(await ordersOf(order)).toBe(1);
  });

  it("a takeover after a crash between the write and its record: the probe first, no second write", async () => {
    let crash = true;
    const { h, legacy } = setup({
      leaseMs: 2_000,
      afterRun: () => {
        if (crash) {
          crash = false;
          throw new Error("worker died after the write");
        }
      },
    });
    const { id, order } = await started(h);
    const [message] = h.queue.take();
    await h.deliver([message!.body]);
    expect((await stepsOf(id)).create!.state).toBe("EXECUTING");
    expect(await ordersOf(order)).toBe(1); // written, not recorded
    h.clock.advance(2_000);
    await h.deliver([message!.body]);
    await h.drain();
    await expectVerifiedExisting(id, order, 2);
    expect(legacy.calls).toEqual([`POST ${ORDERS}`, `GET ${ORDERS}`]);
    expect((await eventsOf(id)).map((e) => e.type)).toEqual(["lease_expired"]);
  });

  it("an operator retry of a FAILED write whose record exists: verified, no write", async () => {
    const { h, legacy } = setup();
    const { id, order } = await started(h, createWorkflow({ maxAttempts: 1 }));
    await legacy.loseNextWriteAnswer();
    await h.drain();
    expect((await stepsOf(id)).create!.state).toBe("FAILED");
    expect(await ordersOf(order)).toBe(1);
    const ref = { executionId: id, vertexId: "create" };
    expect(await retryFailedStep(env.DB, WS, ref, h.clock.now())).toEqual({ retried: true, acknowledged: false });
    await h.queue.send(ref satisfies StepMessage);
    await h.drain();
    await expectVerifiedExisting(id, order, 2);
    expect(legacy.calls).toEqual([`POST ${ORDERS}`, `GET ${ORDERS}`]);
  });

  it("a start over: the new execution's first attempt runs the probe first (the old one wrote)", async () => {
    const { h, legacy } = setup();
    const workflow = await seedWorkflow(WS, createWorkflow());
    const order = unique("LO");
    const old = await h.start(workflow, { order: { id: order, total: 10 } });
    await h.drain();
    expect((await createStep(old)).output).toMatchObject({ status: 201 });
    expect((await createStep(old)).output.verified).toBeUndefined();
    const { executionId } = await startWorkflowExecution(
      { db: env.DB, queue: h.queue as unknown as Queue<StepMessage>, now: h.clock.now },
      {
        workflow,
        triggerKind: "start_over",
        payload: { order: { id: order, total: 10 } },
        identity: { kind: "forced" },
        startedOverFrom: old,
      },
    );
    await h.drain();
    await expectVerifiedExisting(executionId, order, 1);
    expect(legacy.calls).toEqual([`POST ${ORDERS}`, `GET ${ORDERS}`]);
  });

  it("condition false: the earlier attempt never reached the destination, so the re-attempt writes", async () => {
    const { h, legacy } = setup();
    const { id, order } = await started(h);
    legacy.answer("POST", 0); // a network error before the legacy API saw the write
    await h.drain();
    const step = await createStep(id);
    expect(step).toMatchObject({ state: "COMPLETED", attempt: 2, output: { status: 201 }, request: { method: "POST" } });
    expect(step.output.verified).toBeUndefined();
    expect(legacy.calls).toEqual([`POST ${ORDERS}`, `GET ${ORDERS}`, `POST ${ORDERS}`]);
    expect(await ordersOf(order)).toBe(1);
  });

  it("a 404 from the probe is an answer: the condition decides (not there), and the re-attempt writes", async () => {
    const { h, legacy } = setup();
    const { id, order } = await started(h);
    legacy.answer("POST", 0);
    legacy.answer("GET", 404);
    await h.drain();
    expect(await createStep(id)).toMatchObject({ state: "COMPLETED", attempt: 2, output: { status: 201 } });
    expect(legacy.calls).toEqual([`POST ${ORDERS}`, `GET ${ORDERS}`, `POST ${ORDERS}`]);
    expect(await ordersOf(order)).toBe(1);
  });

  it("the probe answers 503: retried per the step's policy (counted), then verified", async () => {
    const { h, legacy } = setup();
    const { id, order } = await started(h);
    await legacy.loseNextWriteAnswer();
    legacy.answer("GET", 503);
    await h.drain();
    await expectVerifiedExisting(id, order, 3);
    expect(legacy.calls).toEqual([`POST ${ORDERS}`, `GET ${ORDERS}`, `GET ${ORDERS}`]);
    const events = await eventsOf(id);
    expect(events.map((e) => e.type)).toEqual(["attempt_failed", "attempt_failed"]);
    expect(events[1]!.detail).toContain("attempt 2: verify probe: GET localhost:8788/legacy/orders answered 503");
  });

  /** A write whose answer is lost, then a probe that answers `status` (`count` times): the step fails, nothing written again. */
  async function failedOnProbe(status: number, count: number, retry?: Record<string, unknown>) {
    const { h, legacy } = setup();
    const { id, order } = await started(h, createWorkflow(retry));
    await legacy.loseNextWriteAnswer();
    legacy.answer("GET", status, count);
    await h.drain();
    const step = await createStep(id);
    expect(step.state).toBe("FAILED");
    expect(legacy.calls).toEqual([`POST ${ORDERS}`, `GET ${ORDERS}`]);
    expect(await ordersOf(order)).toBe(1);
    return step;
  }

  it("the probe keeps failing: the step gives up after its retry budget, nothing written again", async () => {
    const step = await failedOnProbe(503, 5, { maxAttempts: 2, backoff: "fixed", initialDelayMs: 500 });
    expect(step.error).toBe("gave up after 2 attempt(s): verify probe: GET localhost:8788/legacy/orders answered 503");
  });

  it("the probe answers 401: whether the write landed is unknown, so the step fails without writing", async () => {
    const step = await failedOnProbe(401, 1);
    expect(step.error).toMatch(
      /^verify probe: GET localhost:8788\/legacy\/orders answered 401, so whether an earlier attempt wrote is unknown/,
    );
    expect(step.attempt).toBe(2);
  });
});
