/**
 * The clock seam (src/lib/clock.ts): a route, a cron task and the queue handler all read the
 * injected time, through the shard envs the entry points build from the env handed in.
 */
import { createExecutionContext, createMessageBatch, createScheduledController, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { clockOf, nowOf, withClock } from "../../src/lib/clock";
import { handleQueueBatch } from "../../src/queue";
import { runScheduled } from "../../src/scheduled";
import { deliveredEnv } from "../helpers/shards";

const T = 2_000_000_000_000;

function clockedEnv(sent: unknown[]) {
  let t = T;
  const queue = {
    send: async (body: unknown) => void sent.push(body),
    sendBatch: async (messages: Iterable<MessageSendRequest>) => void [...messages].forEach((m) => sent.push(m.body)),
  };
  const base = {
    ...deliveredEnv(env),
    QUEUE: queue,
    CHAIN_STEPS: "off",
    D1_SHARDS: "DB,DB_1",
    // Both shards: the seam must survive the shard env built for shard 1.
    WORKSPACE_SHARDS: "clock-a:0,clock-b:1",
    API_TOKENS: "clock-a-token:clock-a,clock-b-token:clock-b",
  } as unknown as Env;
  return { env: withClock(base, () => t), advance: (ms: number) => (t += ms), now: () => t };
}

async function call(e: Env, token: string, method: string, path: string, body?: unknown): Promise<Response> {
  const ctx = createExecutionContext();
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await app.fetch(
    new Request(`http://idemflow.test${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }),
    e,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res;
}

describe("the clock seam", () => {
  it("is the wall clock when nothing is injected, and never changes the env it is given", () => {
    const before = Date.now();
    expect(nowOf(env)).toBeGreaterThanOrEqual(before);
    const clocked = withClock(env, () => 42);
    expect(nowOf(clocked)).toBe(42);
    expect(nowOf({ ...clocked })).toBe(42); // a spread (a shard env) keeps it
    expect(nowOf(env)).toBeGreaterThanOrEqual(before);
    expect(Object.keys(clocked)).toEqual(Object.keys(env)); // no var or binding name: a symbol
    expect(clockOf(env)()).toBeGreaterThanOrEqual(before);
  });

  it("a route, the queue handler and a cron task read the injected time", async () => {
    const sent: unknown[] = [];
    const c = clockedEnv(sent);
    const wf = {
      id: "clocked",
      vertices: [
        { id: "entry", type: "ENTRY_POINT", config: {} },
        { id: "shape", type: "TRANSFORM", config: { output: "= payload" } },
      ],
      edges: [{ from: "entry", to: "shape" }],
    };
    for (const [token, db] of [
      ["clock-a-token", deliveredEnv(env).DB],
      ["clock-b-token", env.DB_1],
    ] as const) {
      expect((await call(c.env, token, "PUT", "/v1/workflows/clocked", wf)).status).toBeLessThan(300);
      // A route: the trigger records the execution at the injected time…
      const started = (await (await call(c.env, token, "POST", "/v1/workflows/clocked/trigger", { n: 1 })).json()) as {
        executionId: string;
      };
      const execution = await db
        .prepare("SELECT created_at FROM executions WHERE id = ?1")
        .bind(started.executionId)
        .first<{ created_at: number }>();
      expect(execution?.created_at).toBe(c.now());
      // …and so does the events route.
      expect((await call(c.env, token, "POST", "/v1/events", { name: "clock.tick", match: "m", id: `e-${token}` })).status).toBe(202);
      const event = await db.prepare("SELECT max(received_at) AS received_at FROM events").first<{ received_at: number }>();
      expect(event?.received_at).toBe(c.now());
      // The queue handler: the step settles at the (advanced) injected time.
      c.advance(5_000);
      const batch = createMessageBatch<unknown>(
        "idemflow-steps",
        sent.splice(0).map((body, i) => ({ id: `m-${token}-${i}`, timestamp: new Date(c.now()), attempts: 1, body })),
      );
      const ctx = createExecutionContext();
      await handleQueueBatch(batch, c.env, ctx);
      await waitOnExecutionContext(ctx);
      const step = await db
        .prepare("SELECT state, updated_at FROM steps WHERE execution_id = ?1 AND vertex_id = 'shape'")
        .bind(started.executionId)
        .first<{ state: string; updated_at: number }>();
      expect(step).toEqual({ state: "COMPLETED", updated_at: c.now() });
    }
    // A cron task: the storage task counts executions at the tick's time, which is the injected one.
    c.advance(60_000);
    const ctx = createExecutionContext();
    await runScheduled(createScheduledController({ cron: "* * * * *", scheduledTime: Date.now() }), c.env, ctx);
    await waitOnExecutionContext(ctx);
    for (const db of [deliveredEnv(env).DB, env.DB_1]) {
      const counted = await db
        .prepare("SELECT value FROM history_counters WHERE name = 'executions_counted_at'")
        .first<{ value: number }>();
      expect(counted?.value).toBe(c.now());
    }
  });
});
