/**
 * What the search tests share: triggers through the real trigger service on a harness's clock and
 * queue (so its steps run when the test drains them), the search over HTTP (the real route, the
 * real problem answers), and the index rows of an execution.
 */
import { env } from "cloudflare:test";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import type { StoredWorkflow } from "../../src/definitions/store";
import { triggerFromRequest } from "../../src/ingress/trigger";
import type { StartResult } from "../../src/ingress/start";
import type { StepMessage } from "../../src/steps/messages";
import { dbOf } from "../helpers/shards";
import { BASE, jsonRequest } from "../ingress/helpers";
import { callApp, chargeWorkflow, unique, type Harness } from "../steps/helpers";

export const WS = "dev"; // dev-token's workspace

/** `definition` with its entry point's config replaced (its `idempotencyFields`, say). */
export function withEntry(definition: WorkflowDefinitionInput, config: Record<string, unknown>): WorkflowDefinitionInput {
  const [entry, ...rest] = definition.vertices;
  return { ...definition, vertices: [{ ...entry!, config } as (typeof definition.vertices)[number], ...rest] };
}

/** A charge workflow (entry → charge with `$idempotencyKey('charge', payload.order.id)` → done) deduplicating on `fields`. */
export function chargeOn(fields: string | string[] | null, charge: Record<string, unknown> = {}): WorkflowDefinitionInput {
  const definition = chargeWorkflow(unique("wf"), charge);
  return fields === null ? definition : withEntry(definition, { idempotencyFields: fields });
}

/** A production trigger of `workflow` through the trigger service, on the harness's clock and queue. */
export function trigger(
  h: Harness,
  workflow: StoredWorkflow,
  body: unknown,
  options: { query?: string; workspace?: string; db?: D1Database } = {},
): Promise<StartResult> {
  const workspace = options.workspace ?? workflow.workspace;
  return triggerFromRequest(
    { db: options.db ?? dbOf(env, workspace), queue: h.queue as unknown as Queue<StepMessage>, now: h.clock.now },
    {
      workspace,
      workflowId: workflow.workflowId,
      invocation: "production",
      request: jsonRequest(`${BASE}/v1/workflows/${workflow.workflowId}/trigger${options.query ?? ""}`, body),
    },
  );
}

export interface SearchAnswer {
  items: Array<{ executionId: string; workflowId: string; status: string; duplicatesStopped: Record<string, number> }>;
  nextCursor: string | null;
  removed?: Array<{ executionId: string; workflowId: string; status: string; reason: string; archived: boolean; removedAt: string }>;
  keys?: Array<{ key: string; destination: string; executionId: string; vertexId: string; firstSentAt: string }>;
}

/** `GET /v1/executions?<query>` as `token`'s workspace (default dev). */
export async function search(h: Harness, query: string, token = "dev-token"): Promise<SearchAnswer & { status: number }> {
  const response = await callApp(h, "GET", `/v1/executions?${query}`, { token });
  return { status: response.status, ...((await response.json()) as SearchAnswer) };
}

/** The ids a search answered, kept and removed. */
export async function idsFound(h: Harness, query: string, token?: string): Promise<{ items: string[]; removed: string[] }> {
  const answer = await search(h, query, token);
  if (answer.status !== 200) throw new Error(`search ${query} answered ${answer.status}: ${JSON.stringify(answer)}`);
  return { items: answer.items.map((i) => i.executionId).sort(), removed: (answer.removed ?? []).map((r) => r.executionId).sort() };
}

/** The index rows of an execution (in its workspace's database). */
export async function valueRowsOf(executionId: string, db: D1Database = env.DB): Promise<number> {
  return (await db.prepare("SELECT count(*) AS n FROM identity_values WHERE execution_id = ?1").bind(executionId).first<{ n: number }>())!
    .n;
}

/** `?identity=` for a value, encoded. */
export const byIdentity = (value: string) => `identity=${encodeURIComponent(value)}`;
