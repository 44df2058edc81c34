/**
 * The queue handler over shards (src/queue.ts): a message runs on the shard it names (none: shard
 * 0); an execution its shard does not have is retried with an alert, never acked; a shard the
 * deployment does not bind is retried; a malformed shard is poison; dead letters are recorded on
 * their message's shard; one batch spanning shards is one invocation's query count.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import { handleQueueBatch } from "../../src/queue";
import { InvocationShards } from "../../src/shards/invocation";
import { byShard, messageShard } from "../../src/shards/messages";
import { deliveredEnv } from "../helpers/shards";

let lines: Array<Record<string, unknown>> = [];
beforeEach(() => {
  lines = [];
  for (const level of ["log", "warn", "error"] as const) {
    vi.spyOn(console, level).mockImplementation((line: unknown) => void lines.push(JSON.parse(String(line)) as Record<string, unknown>));
  }
});
afterEach(() => vi.restoreAllMocks());

const real = deliveredEnv(env);

/** An env placing `workspace` on shard 1, with the Worker's messages held in `sent`. */
function world() {
  const workspace = `q-${crypto.randomUUID().slice(0, 8)}`;
  const sent: unknown[] = [];
  const queue = {
    send: async (body: unknown) => void sent.push(body),
    sendBatch: async (messages: Iterable<MessageSendRequest>) => void [...messages].forEach((m) => sent.push(m.body)),
  };
  const e = {
    ...real,
    QUEUE: queue,
    CHAIN_STEPS: "off",
    D1_SHARDS: "DB,DB_1",
    WORKSPACE_SHARDS: `${workspace}:1`,
    API_TOKENS: `${workspace}-token:${workspace}`,
  } as unknown as Env;
  return { workspace, sent, e };
}

async function call(w: ReturnType<typeof world>, method: string, path: string, body?: unknown): Promise<Response> {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request(`http://idemflow.test${path}`, {
      method,
      headers: { authorization: `Bearer ${w.workspace}-token`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
    w.e,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res;
}

async function deliver(e: Env, bodies: unknown[], queue = "idemflow-steps") {
  const batch = createMessageBatch<unknown>(
    queue,
    bodies.map((body, i) => ({ id: `m-${i}`, timestamp: new Date(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  await handleQueueBatch(batch, e, ctx);
  const result = await getQueueResult(batch, ctx);
  return { ...result, retried: result.retryMessages.map((m) => m.msgId).sort(), acked: [...result.explicitAcks].sort() };
}

/** A workflow of one transform, triggered on shard 1; answers its execution id and the message the trigger sent. */
async function triggeredOnShard1(w: ReturnType<typeof world>): Promise<{ id: string; message: Record<string, unknown> }> {
  const definition = {
    id: "wf",
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: {} },
      { id: "shape", type: "TRANSFORM", config: { output: "= payload" } },
    ],
    edges: [{ from: "entry", to: "shape" }],
  };
  expect((await call(w, "PUT", "/v1/workflows/wf", definition)).status).toBe(201);
  const res = await call(w, "POST", "/v1/workflows/wf/trigger", { n: 1 });
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
    const w = world();
    const { id, message } = await triggeredOnShard1(w);
    expect(message).toEqual({ executionId: id, vertexId: "shape", shard: 1 });
    const result = await deliver(w.e, [message]);
    expect(result.acked).toEqual(["m-0"]);
    expect(await stepState(real.DB_1, id)).toBe("COMPLETED");
  });

  it("the same message without its shard (read as shard 0) finds no execution there: retried with an alert, never acked", async () => {
    const w = world();
    const { id, message } = await triggeredOnShard1(w);
    const { shard: _shard, ...unsharded } = message;
    const result = await deliver(w.e, [unsharded]);
    expect(result.acked).toEqual([]);
    expect(result.retried).toEqual(["m-0"]);
    expect(lines).toContainEqual(expect.objectContaining({ event: "queue.execution_missing", shard: 0, executionId: id }));
    // Nothing was written on shard 0, and the step still waits on its own shard.
    expect(await stepState(real.DB_1, id)).toBe("DISPATCHED");
    expect(await real.DB.prepare("SELECT count(*) AS n FROM steps WHERE execution_id = ?1").bind(id).first("n")).toBe(0);
  });

  it("a shard this deployment does not bind is retried (a rollout in progress); a malformed shard is acked as poison", async () => {
    const w = world();
    const result = await deliver(w.e, [
      { executionId: "e", vertexId: "v", shard: 5 },
      { executionId: "e", vertexId: "v", shard: "one" },
    ]);
    expect(result.retried).toEqual(["m-0"]);
    expect(result.acked).toEqual(["m-1"]);
    expect(lines).toContainEqual(expect.objectContaining({ event: "queue.shard_unavailable", shard: 5 }));
    expect(lines).toContainEqual(expect.objectContaining({ event: "queue.message_malformed", messageId: "m-1" }));
  });

  it("a batch spanning both shards runs each message on its own shard", async () => {
    const a = world();
    const { id: onOne, message: m1 } = await triggeredOnShard1(a);
    // The same workflow in a workspace on shard 0.
    const b = world();
    const zero = { ...b, e: { ...b.e, WORKSPACE_SHARDS: `${b.workspace}:0` } as unknown as Env };
    const { id: onZero, message: m0 } = await triggeredOnShard1(zero);
    expect(m0.shard).toBe(0);
    const result = await deliver(a.e, [m1, m0]);
    expect(result.acked).toEqual(["m-0", "m-1"]);
    expect(await stepState(real.DB_1, onOne)).toBe("COMPLETED");
    expect(await stepState(real.DB, onZero)).toBe("COMPLETED");
  });
});

describe("dead letters", () => {
  it("are recorded on their message's shard (none, or one not bound: shard 0)", async () => {
    const w = world();
    const tag = crypto.randomUUID();
    const result = await deliver(
      w.e,
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
