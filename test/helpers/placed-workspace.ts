/**
 * A workspace placed on one shard of the Worker, driven through its real entry points: the HTTP app
 * (as the workspace's token) and the queue handler, with what the Worker sends to its queue held
 * so the test decides when it is delivered. Each shard's database may be replaced (a counting
 * wrapper), so a test sees which shard every statement went to.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult, waitOnExecutionContext, type QueueResult } from "cloudflare:test";
import { app } from "../../src/app";
import { handleQueueBatch } from "../../src/queue";
import { deliveredEnv } from "./shards";

/** A workflow of one transform (`shape`): the smallest execution with a step message. */
export const ONE_STEP = {
  vertices: [
    { id: "entry", type: "ENTRY_POINT", config: {} },
    { id: "shape", type: "TRANSFORM", config: { output: "= payload" } },
  ],
  edges: [{ from: "entry", to: "shape" }],
};

export interface PlacedWorkspace {
  workspace: string;
  shard: number;
  /** The bodies the Worker sent to its queue, in order, not yet delivered. */
  sent: unknown[];
  /** The Worker's env: the workspace placed on its shard, its token `<workspace>-token`, chaining off, the queue held. */
  env: Env;
  /** A request to the app as the workspace (a JSON body), answered after everything it scheduled ran; `key` adds an Idempotency-Key. */
  call(method: string, path: string, body?: unknown, options?: { key?: boolean }): Promise<Response>;
  /** Delivers `bodies` as one batch to the Worker's queue handler (on `queue`). */
  deliver(bodies: unknown[], queue?: string): Promise<QueueResult & { acked: string[]; retried: string[] }>;
  /** Delivers every held message, round after round, until none is left (or `rounds`). */
  deliverAll(rounds?: number): Promise<void>;
}

export function placedWorkspace(
  prefix: string,
  shard: 0 | 1,
  { databases, vars = {} }: { databases?: readonly [D1Database, D1Database]; vars?: Record<string, string> } = {},
): PlacedWorkspace {
  const workspace = `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
  const real = deliveredEnv(env);
  const sent: unknown[] = [];
  const queue = {
    send: async (body: unknown) => void sent.push(body),
    sendBatch: async (messages: Iterable<MessageSendRequest>) => void [...messages].forEach((m) => sent.push(m.body)),
  };
  const placed = {
    ...real,
    ...(databases ? { DB: databases[0], DB_1: databases[1] } : {}),
    QUEUE: queue,
    CHAIN_STEPS: "off",
    D1_SHARDS: "DB,DB_1",
    WORKSPACE_SHARDS: `${workspace}:${shard}`,
    API_TOKENS: `${workspace}-token:${workspace}`,
    ...vars,
  } as unknown as Env;
  let keys = 0;
  let batches = 0;

  const w: PlacedWorkspace = {
    workspace,
    shard,
    sent,
    env: placed,
    async call(method, path, body, { key = false } = {}) {
      const headers: Record<string, string> = { authorization: `Bearer ${workspace}-token` };
      if (body !== undefined) headers["content-type"] = "application/json";
      if (key) headers["idempotency-key"] = `k-${++keys}`;
      const ctx = createExecutionContext();
      const res = await app.fetch(
        new Request(`http://idemflow.test${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }),
        placed,
        ctx,
      );
      await waitOnExecutionContext(ctx);
      return res;
    },
    async deliver(bodies, queueName = "idemflow-steps") {
      const batch = createMessageBatch<unknown>(
        queueName,
        bodies.map((body, i) => ({ id: `m-${batches}-${i}`, timestamp: new Date(), attempts: 1, body })),
      );
      batches++;
      const ctx = createExecutionContext();
      await handleQueueBatch(batch, placed, ctx);
      const result = await getQueueResult(batch, ctx);
      return { ...result, retried: result.retryMessages.map((m) => m.msgId).sort(), acked: [...result.explicitAcks].sort() };
    },
    async deliverAll(rounds = 20) {
      for (let i = 0; i < rounds && sent.length > 0; i++) await w.deliver(sent.splice(0));
    },
  };
  return w;
}
