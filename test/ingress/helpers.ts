/** Test setup for ingress: real workflows in the real store, a counting queue, signing. */
import { env } from "cloudflare:test";
import { saveWorkflow, getWorkflow, type StoredWorkflow } from "../../src/definitions/store";
import { WorkflowDefinition, type WorkflowDefinitionInput } from "../../src/definitions/schema";
import type { IngressDeps } from "../../src/ingress/start";
import type { StepMessage } from "../../src/steps/messages";
import { hmacSha256, toHex } from "../../src/lib/crypto";
import { dbOf } from "../helpers/shards";

let counter = 0;
/** A fresh id per call: storage is shared by every test of a file. */
export function unique(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

/** ENTRY_POINT → one TRANSFORM (no side effects), with entry config overrides. */
export function transformWorkflow(
  id: string,
  entryConfig: Record<string, unknown> = {},
  extra: Partial<WorkflowDefinitionInput> = {},
): WorkflowDefinitionInput {
  return {
    id,
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: entryConfig },
      { id: "shape", type: "TRANSFORM", config: { output: { seen: "= payload" } } },
    ],
    edges: [{ from: "received", to: "shape" }],
    ...extra,
  };
}

/** Saves a workflow on its workspace's shard (test/helpers/shards.ts), where the engine will look for it. */
export async function seedWorkflow(workspace: string, input: WorkflowDefinitionInput, now = Date.now()): Promise<StoredWorkflow> {
  const definition = WorkflowDefinition.parse(input);
  const db = dbOf(env, workspace);
  await saveWorkflow(db, workspace, definition, now);
  const stored = await getWorkflow(db, workspace, definition.id);
  if (!stored) throw new Error("seeded workflow not found");
  return stored;
}

/** A queue that forwards to the real binding and records what was sent. */
export function countingQueue(real: Queue = env.QUEUE) {
  const sent: StepMessage[] = [];
  const queue: IngressDeps["queue"] = {
    sendBatch: async (messages, options?: QueueSendBatchOptions) => {
      for (const m of messages) sent.push(m.body as StepMessage);
      return real.sendBatch(messages as Iterable<MessageSendRequest>, options);
    },
  };
  return { queue, sent };
}

export function jsonRequest(
  url: string,
  body: unknown,
  init: { token?: string; headers?: Record<string, string>; raw?: string } = {},
): Request {
  const headers: Record<string, string> = { "content-type": "application/json", ...(init.headers ?? {}) };
  if (init.token !== undefined) headers.authorization = `Bearer ${init.token}`;
  return new Request(url, { method: "POST", headers, body: init.raw ?? JSON.stringify(body) });
}

/**
 * The signature header value of scheme v1 (docs/ingress.md, "Signed webhooks"), written out here
 * rather than taken from src so the tests check the documented bytes:
 * `v1=` + hex(HMAC-SHA256(secret, "v1:<timestamp>:<workspaceId>:<workflowId>:" + raw body)).
 */
export async function sign(
  secret: string,
  timestamp: string,
  raw: string,
  target: { workspace: string; workflowId: string },
): Promise<string> {
  return `v1=${toHex(await hmacSha256(secret, `v1:${timestamp}:${target.workspace}:${target.workflowId}:${raw}`))}`;
}

export async function countRows(sql: string, ...params: unknown[]): Promise<number> {
  const row = await env.DB.prepare(sql)
    .bind(...params)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

export const BASE = "http://idemflow.test";
