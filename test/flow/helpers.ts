/** What the flow-control tests share: a limited connector over the harness's destination, a workflow through it, the records. */
import { env } from "cloudflare:test";
import { getWorkflow, type StoredWorkflow } from "../../src/definitions/store";
import { charging } from "../connectors/helpers";
import { callApp, unique, type Harness } from "../steps/helpers";

export const WS = "dev";

/** The harness's payments API as a connector with `limits`. */
export function limitedPayments(name: string, limits: Record<string, unknown> | undefined, more: Record<string, unknown> = {}) {
  return {
    name,
    baseUrl: "http://localhost:8788/payments",
    headers: { "Content-Type": "application/json" },
    key: { profile: "stripe", rule: { fields: ["order"], format: "plain" } },
    retry: { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000 },
    ...(limits ? { limits } : {}),
    ...more,
  };
}

export async function putJson(h: Harness, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await callApp(h, "PUT", path, { body });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** A connector `name` with `limits` and a charge workflow through it, saved in `dev`. */
export async function limitedWorkflow(
  h: Harness,
  limits: Record<string, unknown>,
  name = unique("lim"),
): Promise<{ name: string; wf: StoredWorkflow }> {
  const saved = await putJson(h, `/v1/connectors/${name}`, limitedPayments(name, limits));
  if (saved.status !== 201) throw new Error(`connector not saved: ${JSON.stringify(saved.body)}`);
  const wf = charging(name);
  const put = await putJson(h, `/v1/workflows/${wf.id}`, wf);
  if (put.status !== 201) throw new Error(`workflow not saved: ${JSON.stringify(put.body)}`);
  return { name, wf: (await getWorkflow(env.DB, WS, wf.id))! };
}

/** Counts the destination's calls in flight (the harness's `dest.fetch` wrapped): its maximum and every call's start. */
export function inFlightMeter(h: Harness): { max: () => number; now: () => number; starts: number[] } {
  let inFlight = 0;
  let max = 0;
  const starts: number[] = [];
  const inner = h.dest.fetch;
  h.rt.fetch = async (input, init) => {
    inFlight++;
    max = Math.max(max, inFlight);
    starts.push(h.clock.now());
    try {
      return await inner(input, init);
    } finally {
      inFlight--;
    }
  };
  return { max: () => max, now: () => inFlight, starts };
}

export async function stepRow(executionId: string, vertexId = "charge") {
  return env.DB.prepare(
    "SELECT state, epoch, attempt, retry_base, parked_until, lease_until, permit_wait FROM steps " +
      "WHERE execution_id = ?1 AND vertex_id = ?2",
  )
    .bind(executionId, vertexId)
    .first<{
      state: string;
      epoch: number;
      attempt: number;
      retry_base: number;
      parked_until: number | null;
      lease_until: number | null;
      permit_wait: string | null;
    }>();
}

export async function attemptsOf(executionId: string, vertexId = "charge"): Promise<Array<{ attempt: number; outcome: string }>> {
  const { results } = await env.DB.prepare(
    "SELECT attempt, outcome FROM step_attempts WHERE execution_id = ?1 AND vertex_id = ?2 ORDER BY epoch",
  )
    .bind(executionId, vertexId)
    .all<{ attempt: number; outcome: string }>();
  return results;
}

export async function eventTypes(executionId: string): Promise<string[]> {
  const { results } = await env.DB.prepare("SELECT type FROM step_events WHERE execution_id = ?1 ORDER BY id")
    .bind(executionId)
    .all<{ type: string }>();
  return results.map((r) => r.type);
}

export async function counters(executionId: string) {
  return env.DB.prepare("SELECT max_attempt, redeliveries_stopped FROM executions WHERE id = ?1")
    .bind(executionId)
    .first<{ max_attempt: number; redeliveries_stopped: number }>();
}
