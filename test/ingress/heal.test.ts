/**
 * Trigger traffic heals lost step messages (src/ingress/heal.ts). Its own file on purpose: the
 * reaper's throttle is per isolate, and every test file gets a fresh one, so nothing else here
 * (no earlier queue batch, no earlier trigger) can have used it up.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../src/index";
import { startWorkflowExecution } from "../../src/ingress/start";
import { DEFAULT_OVERDUE_MS } from "../../src/steps/runtime";
import type { StepMessage } from "../../src/steps/messages";
import { BASE, jsonRequest, seedWorkflow, transformWorkflow, unique } from "./helpers";
import { shardIndexOf } from "../helpers/shards";

/** `worker.fetch` takes a request as the runtime delivers it (with incoming `cf` properties). */
type IncomingRequest = Request<unknown, IncomingRequestCfProperties>;

/** Start an execution whose first-step message is lost: committed DISPATCHED, never sent. */
async function lostMessageExecution(workspace: string, workflowId: string, startedAt: number): Promise<string> {
  const stored = await seedWorkflow(workspace, transformWorkflow(workflowId), startedAt);
  const dropped = { sendBatch: async () => undefined } as unknown as Queue<StepMessage>;
  const result = await startWorkflowExecution(
    { db: env.DB, queue: dropped, now: () => startedAt },
    { workflow: stored, triggerKind: "test", payload: { lost: true }, identity: { kind: "forced" } },
  );
  return result.executionId;
}

const stepOf = (executionId: string) =>
  env.DB.prepare("SELECT state, available_at FROM steps WHERE execution_id = ? AND vertex_id = 'shape'")
    .bind(executionId)
    .first<{ state: string; available_at: number }>();

describe("a trigger request heals lost step messages", () => {
  it("re-sends an overdue DISPATCHED step after an unrelated trigger, throttled per isolate, without holding the answer", async () => {
    const sent: StepMessage[] = [];
    const capturing = {
      send: (body: StepMessage, options?: QueueSendOptions) => {
        sent.push(body);
        return env.QUEUE.send(body, options);
      },
      sendBatch: (messages: Iterable<MessageSendRequest<StepMessage>>, options?: QueueSendBatchOptions) => {
        const list = [...messages];
        for (const m of list) sent.push(m.body);
        return env.QUEUE.sendBatch(list, options);
      },
    };
    const testEnv = { ...env, QUEUE: capturing } as unknown as Env;
    const backdated = Date.now() - DEFAULT_OVERDUE_MS - 5 * 60_000;
    const lost = await lostMessageExecution("dev", unique("lost"), backdated);
    expect(await stepOf(lost)).toMatchObject({ state: "DISPATCHED", available_at: backdated });

    const unrelated = unique("unrelated");
    await seedWorkflow("dev", transformWorkflow(unrelated));
    const ctx = createExecutionContext();
    const res = await worker.fetch(
      jsonRequest(`${BASE}/v1/workflows/${unrelated}/trigger`, { n: 1 }, { token: "dev-token" }) as IncomingRequest,
      testEnv,
      ctx,
    );
    expect(res.status).toBe(202);
    await waitOnExecutionContext(ctx);
    // The re-sent message names the shard the execution lives on (SPEC section 13).
    expect(sent).toContainEqual({ executionId: lost, vertexId: "shape", shard: shardIndexOf(env, "dev") });

    // The re-sent message runs on the real queue: the lost step completes.
    let state = "DISPATCHED";
    for (let i = 0; i < 100 && state !== "COMPLETED"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      state = (await stepOf(lost))?.state ?? "missing";
    }
    expect(state).toBe("COMPLETED");

    // Throttled: another lost message right away waits for the next sweep (or cron).
    const lostAgain = await lostMessageExecution("dev", unique("lost"), backdated);
    const ctx2 = createExecutionContext();
    const res2 = await worker.fetch(
      jsonRequest(`${BASE}/v1/workflows/${unrelated}/trigger`, { n: 2 }, { token: "dev-token" }) as IncomingRequest,
      testEnv,
      ctx2,
    );
    expect(res2.status).toBe(202);
    await waitOnExecutionContext(ctx2);
    expect(sent.map((m) => m.executionId)).not.toContain(lostAgain);
    expect(await stepOf(lostAgain)).toMatchObject({ state: "DISPATCHED", available_at: backdated });
  });
});
