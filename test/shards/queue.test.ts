/**
 * The queue handler over shards (src/queue.ts): a message runs on the shard it names (none: shard
 * 0); an execution its shard does not have is retried with an alert, never acked; a shard the
 * deployment does not bind is retried; a malformed shard is poison; dead letters are recorded on
 * their message's shard; one batch spanning shards is one invocation's query count.
 */
import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { InvocationShards } from "../../src/shards/invocation";
import { byShard, messageShard } from "../../src/shards/messages";
import { captureLogLines } from "../helpers/log-lines";
import { ONE_STEP, placedWorkspace, type PlacedWorkspace } from "../helpers/placed-workspace";
import { deliveredEnv } from "../helpers/shards";

const lines = captureLogLines();
afterEach(() => vi.restoreAllMocks());

const real = deliveredEnv(env);

/** A one-step workflow triggered in `w`; answers its execution id and the message the trigger sent. */
async function triggered(w: PlacedWorkspace): Promise<{ id: string; message: Record<string, unknown> }> {
  expect((await w.call("PUT", "/v1/workflows/wf", { id: "wf", ...ONE_STEP })).status).toBe(201);
  const res = await w.call("POST", "/v1/workflows/wf/trigger", { n: 1 });
  expect(res.status).toBe(202);
  const id = (await res.json<{ executionId: string }>()).executionId;
  const message = w.sent.pop() as Record<string, unknown>;
  return { id, message };
}

const stepState = (db: D1Database, id: string) =>
  db.prepare("SELECT state FROM steps WHERE execution_id = ?1 AND vertex_id = 'shape'").bind(id).first<string>("state");

describe("messages name their shard", () => {
  it("absent means shard 0 (a message sent before shards); a non-number is malformed", () => {
    expect(messageShard({ executionId: "e", vertexId: "v" })).toBe(0);
    expect(messageShard({ executionId: "e", vertexId: "v", shard: 1 })).toBe(1);
    expect(messageShard("garbage")).toBe(0);
    for (const bad of ["1", -1, 1.5, null, Number.MAX_SAFE_INTEGER + 1]) expect(messageShard({ shard: bad })).toBeNull();
    const groups = byShard([{ body: { shard: 1 } }, { body: {} }, { body: { shard: 1 } }, { body: { shard: "x" } }]);
    expect([...groups].map(([shard, ms]) => [shard, ms.length])).toEqual([
      [1, 2],
      [0, 1],
      [null, 1],
    ]);
  });

  it("a trigger's message carries its workspace's shard, and runs there", async () => {
    const w = placedWorkspace("q", 1);
    const { id, message } = await triggered(w);
    expect(message).toEqual({ executionId: id, vertexId: "shape", shard: 1 });
    const result = await w.deliver([message]);
    expect(result.acked).toEqual(["m-0-0"]);
    expect(await stepState(real.DB_1, id)).toBe("COMPLETED");
  });

  it("the same message without its shard (read as shard 0) finds no execution there: retried with an alert, never acked", async () => {
    const w = placedWorkspace("q", 1);
    const { id, message } = await triggered(w);
    const { shard: _shard, ...unsharded } = message;
    const result = await w.deliver([unsharded]);
    expect(result.acked).toEqual([]);
    expect(result.retried).toEqual(["m-0-0"]);
    expect(lines).toContainEqual(expect.objectContaining({ event: "queue.execution_missing", shard: 0, executionId: id }));
    // Nothing was written on shard 0, and the step still waits on its own shard.
    expect(await stepState(real.DB_1, id)).toBe("DISPATCHED");
    expect(await real.DB.prepare("SELECT count(*) AS n FROM steps WHERE execution_id = ?1").bind(id).first("n")).toBe(0);
  });

  it("a shard this deployment does not bind is retried (a rollout in progress); a malformed shard is acked as poison", async () => {
    const w = placedWorkspace("q", 1);
    const result = await w.deliver([
      { executionId: "e", vertexId: "v", shard: 5 },
      { executionId: "e", vertexId: "v", shard: "one" },
    ]);
    expect(result.retried).toEqual(["m-0-0"]);
    expect(result.acked).toEqual(["m-0-1"]);
    expect(lines).toContainEqual(expect.objectContaining({ event: "queue.shard_unavailable", shard: 5 }));
    expect(lines).toContainEqual(expect.objectContaining({ event: "queue.message_malformed", messageId: "m-0-1" }));
  });

  it("a batch spanning both shards runs each message on its own shard", async () => {
    const { id: onOne, message: m1 } = await triggered(placedWorkspace("q", 1));
    const zero = placedWorkspace("q", 0);
    const { id: onZero, message: m0 } = await triggered(zero);
    expect(m0.shard).toBe(0);
    const result = await zero.deliver([m1, m0]);
    expect(result.acked).toEqual(["m-0-0", "m-0-1"]);
    expect(await stepState(real.DB_1, onOne)).toBe("COMPLETED");
    expect(await stepState(real.DB, onZero)).toBe("COMPLETED");
  });
});

describe("one batch, one chaining budget", () => {
  it("a batch over both shards shares one budget: room for one chained step chains one successor, queues the other", async () => {
    const twoSteps = {
      vertices: [...ONE_STEP.vertices, { id: "after", type: "TRANSFORM", config: { output: "= steps.shape" } }],
      edges: [...ONE_STEP.edges, { from: "shape", to: "after" }],
    };
    const messages: unknown[] = [];
    for (const shard of [0, 1] as const) {
      const w = placedWorkspace("chain", shard);
      expect((await w.call("PUT", "/v1/workflows/wf", { id: "wf", ...twoSteps })).status).toBe(201);
      expect((await w.call("POST", "/v1/workflows/wf/trigger", { n: shard })).status).toBe(202);
      messages.push(...w.sent.splice(0));
    }
    expect(messages.map((m) => (m as { shard: number }).shard)).toEqual([0, 1]);
    // The consumer with chaining on and room for one chained step per invocation (the D1 query
    // limit is per invocation, whatever the database: one budget for both shards' messages).
    const consumer = placedWorkspace("chain-consumer", 0, { vars: { CHAIN_STEPS: "on", CHAIN_MAX_STEPS: "1" } });
    const result = await consumer.deliver(messages);
    expect(result.acked).toHaveLength(2);
    expect(consumer.sent.filter((m) => (m as { vertexId: string }).vertexId === "after")).toHaveLength(1);
  });
});

describe("dead letters", () => {
  it("are recorded on their message's shard (none, or one not bound: shard 0)", async () => {
    const w = placedWorkspace("q", 1);
    const tag = crypto.randomUUID();
    const result = await w.deliver(
      [
        { executionId: `dl-1-${tag}`, vertexId: "v", shard: 1 },
        { executionId: `dl-0-${tag}`, vertexId: "v" },
        { executionId: `dl-9-${tag}`, vertexId: "v", shard: 9 },
      ],
      "idemflow-steps-dlq",
    );
    expect(result.ackAll || result.acked.length === 3).toBe(true);
    const on = async (db: D1Database) =>
      (
        await db
          .prepare("SELECT json_extract(body, '$.executionId') AS id FROM dead_letters WHERE body LIKE ?1 ORDER BY id")
          .bind(`%${tag}%`)
          .all<{ id: string }>()
      ).results.map((r) => r.id);
    expect(await on(real.DB_1)).toEqual([`dl-1-${tag}`]);
    expect(await on(real.DB)).toEqual([`dl-0-${tag}`, `dl-9-${tag}`]);
  });
});

describe("one invocation, one query count", () => {
  it("counts the queries sent to every shard's database together (Workers allow 1,000 per invocation, not per database)", async () => {
    const shards = new InvocationShards(real);
    await shards.env(0).DB.prepare("SELECT 1").first();
    await shards.env(1).DB.batch([shards.env(1).DB.prepare("SELECT 1"), shards.env(1).DB.prepare("SELECT 2")]);
    await shards.env(0).DB.prepare("SELECT 1").first();
    expect(shards.queries()).toBe(4);
    expect(shards.env(1).shard).toBe(1);
    expect(shards.env(1)).toBe(shards.env(1));
  });
});
