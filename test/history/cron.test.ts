/**
 * The history sweep on cron and through the queue: a sweep that stops on its budget with work
 * left sends one continuation message; the queue handler runs the next sweep for it (acked, never
 * retried) beside the batch's step messages, which still reach the step consumer.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { historyLogLine, historyTask, isHistorySweepMessage, runHistorySweep } from "../../src/history/cron";
import { DEFAULT_SWEEP_LIMITS } from "../../src/history/sweep";
import { handleQueueBatch } from "../../src/queue";
import { PERIODIC_TASKS } from "../../src/scheduled";
import { DAY, finishedExecutions } from "./helpers";

async function remaining(ids: string[]): Promise<number> {
  const row = await env.DB.prepare("SELECT count(*) AS n FROM executions WHERE id IN (SELECT value FROM json_each(?1))")
    .bind(JSON.stringify(ids))
    .first<{ n: number }>();
  return row!.n;
}

class RecordingQueue {
  sent: unknown[] = [];
  async send(body: unknown): Promise<void> {
    this.sent.push(body);
  }
  async sendBatch(messages: Iterable<MessageSendRequest<unknown>>): Promise<void> {
    for (const m of messages) this.sent.push(m.body);
  }
}

describe("the history sweep's task", () => {
  it("runs on every tick (registered), under one lease", () => {
    expect(PERIODIC_TASKS).toContain(historyTask);
  });

  it("behind after its budget: one continuation message; the queue handler runs the next sweep for it and acks it", async () => {
    const { ids, dueAt } = await finishedExecutions("history-cron", 9);
    const queue = new RecordingQueue();
    const limits = { ...DEFAULT_SWEEP_LIMITS, executionsPerPass: 2, maxPasses: 2 };
    const first = await runHistorySweep({ ...env, QUEUE: queue as unknown as Queue }, { now: dueAt, via: "cron", limits });
    expect(first).toMatchObject({ skipped: false, drained: false, continued: true });
    expect(first.removed).toBe(4);
    expect(queue.sent).toEqual([{ sweep: "history" }]);
    expect(isHistorySweepMessage(queue.sent[0])).toBe(true);
    expect(historyLogLine(first)).toMatchObject({ event: "history.swept", fields: { removed: 4, continued: true, via: "cron" } });

    // The continuation arrives with a step message for an execution its shard does not have (retried with an alert).
    const batch = createMessageBatch<unknown>("idemflow-steps", [
      { id: "m-1", timestamp: new Date(), attempts: 1, body: { sweep: "history" } },
      { id: "m-2", timestamp: new Date(), attempts: 1, body: { executionId: "nope", vertexId: "done" } },
    ]);
    const ctx = createExecutionContext();
    // The queue's sweep runs on the wall clock: put the executions' due time behind it.
    await env.DB.prepare("UPDATE executions SET sweep_held_until = NULL, finished_at = ?2 WHERE id IN (SELECT value FROM json_each(?1))")
      .bind(JSON.stringify(ids), Date.now() - 8 * DAY)
      .run();
    await handleQueueBatch(batch, { ...env, QUEUE: queue as unknown as Queue }, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks).toEqual(["m-1"]);
    expect(result.retryMessages.map((m) => m.msgId)).toEqual(["m-2"]);
    expect(await remaining(ids)).toBe(0);
  });

  it("an idle minute logs nothing", async () => {
    const report = await runHistorySweep(env, { now: 1, via: "cron" });
    expect(report.removed).toBe(0);
    expect(historyLogLine(report)).toBeNull();
  });
});
