/**
 * The stream run's bounds (issue 26, finding 2): a stream polls one statement at a time, at most
 * `STREAM_MAX_POLLS` times, and the whole invocation — the trigger, the inline run of the first
 * step, the polls — stays under Workers' 1,000 D1 queries. It ends with an id that
 * `GET …/events` continues from. Counted with the counting wrapper (local D1 enforces no limit).
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { STREAM_MAX_POLLS } from "../../src/ingress/watch";
import { countingD1 } from "../helpers/counting-d1";
import { harness, type Harness } from "../steps/helpers";
import { BASE, jsonRequest, seedWorkflow, unique } from "./helpers";

interface Sse {
  id?: string;
  event: string;
  data: Record<string, unknown>;
}

function parseSse(text: string): Sse[] {
  const events: Sse[] = [];
  for (const block of text.split("\n\n")) {
    const e: Partial<Sse> & { dataText?: string } = {};
    for (const line of block.split("\n")) {
      if (line.startsWith("id: ")) e.id = line.slice(4);
      else if (line.startsWith("event: ")) e.event = line.slice(7);
      else if (line.startsWith("data: ")) e.dataText = line.slice(6);
    }
    if (e.event) events.push({ id: e.id, event: e.event, data: JSON.parse(e.dataText ?? "null") as Record<string, unknown> });
  }
  return events;
}

/** One invocation of the Worker's app, its body read to the end and its waitUntil work awaited. */
async function invoke(request: Request, vars: Record<string, unknown>) {
  const ctx = createExecutionContext();
  const response = await app.fetch(request, { ...env, ...vars } as Env, ctx);
  const text = await response.text();
  await waitOnExecutionContext(ctx);
  return { response, events: parseSse(text) };
}

/** A stream run whose queued steps are never delivered (the harness's queue keeps them): it runs until its bound. */
async function heldStream(h: Harness, workflowId: string, vars: Record<string, unknown> = {}) {
  const counting = countingD1(env.DB);
  const request = jsonRequest(`${BASE}/v1/workflows/${workflowId}/stream`, { a: 1 }, { token: "dev-token" });
  const run = await invoke(request, { DB: counting.db, QUEUE: h.queue, STREAM_POLL_MS: "1", ...vars });
  return { ...run, counting };
}

/** entry → s1 → s2 → … → s<n>, all TRANSFORMs. */
function linearWorkflow(id: string, n: number): WorkflowDefinitionInput {
  const ids = Array.from({ length: n }, (_, i) => `s${i + 1}`);
  return {
    id,
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      ...ids.map((v) => ({ id: v, type: "TRANSFORM" as const, config: { output: { at: v } } })),
    ],
    edges: ["received", ...ids].slice(0, -1).map((from, i) => ({ from, to: ids[i]! })),
  };
}

describe("POST /v1/workflows/:id/stream: bounded per invocation", () => {
  it("polls one statement at a time up to its bound, ends with stream.timeout at an events position; GET …/events continues", async () => {
    const h = harness();
    const id = unique("streambound");
    await seedWorkflow("dev", linearWorkflow(id, 2));
    // s1 runs while the stream polls (its message is delivered once sent); s2's message is kept.
    const delivered = (async () => {
      while (h.queue.pending.length === 0) await new Promise((r) => setTimeout(r, 1));
      await h.deliver(h.queue.take().map((p) => p.body));
    })();
    const { response, events, counting } = await heldStream(h, id);
    await delivered;
    expect(response.status).toBe(202);
    const polls = counting.calls.filter((c) => c.sql.some((sql) => sql.includes("AS eventMark")));
    expect(polls).toHaveLength(STREAM_MAX_POLLS);
    expect(polls.every((c) => c.kind === "statement" && c.sql.length === 1)).toBe(true);
    console.log(`stream held to its bound: ${counting.statements()} statements in the invocation, ${polls.length} polls`);
    expect(counting.statements()).toBeLessThan(1000);
    const executionId = events[0]!.data.executionId as string;
    expect(events.map((e) => [e.event, e.data.vertexId])).toEqual([
      ["execution.started", undefined],
      ["step.completed", "received"],
      ["step.started", "s1"],
      ["step.completed", "s1"],
      ["stream.timeout", undefined],
    ]);
    const last = events.at(-1)!;
    expect(last.id).toMatch(/^\d+\.\d+$/);
    expect(last.id).not.toBe("0.0"); // s1's attempt is behind it
    expect(last.data).toMatchObject({ executionId, lastEventId: last.id });

    // s2 runs now; the events route, resumed at the stream's last id, delivers exactly it, then the end.
    expect(h.queue.pending.map((p) => p.body)).toEqual([{ executionId, vertexId: "s2" }]);
    await h.drain();
    const read = async (lastEventId?: string) => {
      const headers: Record<string, string> = { authorization: "Bearer dev-token" };
      if (lastEventId !== undefined) headers["last-event-id"] = lastEventId;
      return (await invoke(new Request(`${BASE}/v1/executions/${executionId}/events`, { headers }), {})).events;
    };
    const after = await read(last.id);
    expect(after.at(-1)).toMatchObject({ event: "execution.finished", data: { executionId, status: "COMPLETED" } });
    expect(after.filter((e) => e.event === "attempt").map((e) => [e.data.vertexId, e.data.outcome])).toEqual([["s2", "completed"]]);
    // From the start: s1's attempt too, before the stream's position; s2's after it.
    const all = await read();
    expect(all.filter((e) => e.event === "attempt").map((e) => e.data.vertexId)).toEqual(["s1", "s2"]);
    expect(all.slice(1)).toEqual(after);
  });

  it("counts its polls against the inline run of the first step: at CHAIN_MAX_QUERIES' cap, the invocation stays under 1,000", async () => {
    const h = harness();
    const id = unique("streamchain");
    // 49 transforms (the most a workflow may have with its entry): every other one completes in its
    // predecessor's settle (src/steps/inline-transform.ts), so a chain of 40 no longer reached the cap.
    await seedWorkflow("dev", linearWorkflow(id, 49));
    const { events, counting } = await heldStream(h, id, { CHAIN_STEPS: "on", CHAIN_MAX_QUERIES: "900", CHAIN_MAX_STEPS: "1000" });
    const polls = counting.calls.filter((c) => c.sql.some((sql) => sql.includes("AS eventMark"))).length;
    const steps = events.filter((e) => e.event === "step.completed").length;
    console.log(`stream + inline run at the cap: ${counting.statements()} statements, ${polls} polls, ${steps} steps completed`);
    // The inline run chained steps (it spent most of its budget) and left the rest to the queue.
    expect(steps).toBeGreaterThan(5);
    expect(h.queue.pending).toHaveLength(1);
    expect(polls).toBe(STREAM_MAX_POLLS);
    expect(counting.statements()).toBeLessThan(1000);
    expect(events.at(-1)!.event).toBe("stream.timeout");
  });
});
