/**
 * The WAIT_FOR_EVENT tests' shared pieces: a workflow that waits (entry → confirm → done), an event
 * delivered straight through the delivery batch on the harness's clock, and a wait started and
 * parked.
 */
import { env } from "cloudflare:test";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { ingestEvent, type EventInput } from "../../src/events/ingest";
import { seedWorkflow, unique, type Harness } from "./helpers";

/** dev-token's workspace: the routes' tests and the harness's share it. */
export const WAIT_WS = "dev";

/** entry → confirm (WAIT_FOR_EVENT on `event`, matched on payload.order) → done (a transform reading the event's data). */
export function waitingWorkflow(event: string, config: Record<string, unknown> = {}, id = unique("wf")): WorkflowDefinitionInput {
  return {
    id,
    vertices: [
      { id: "entry", type: "ENTRY_POINT", config: {} },
      { id: "confirm", type: "WAIT_FOR_EVENT", config: { event, match: "= payload.order", timeout: "3d", ...config } },
      { id: "done", type: "TRANSFORM", config: { output: { got: "= steps.confirm.data" } } },
    ],
    edges: [
      { from: "entry", to: "confirm" },
      { from: "confirm", to: "done" },
    ],
  } as WorkflowDefinitionInput;
}

/** An event delivered on the harness's database and clock, as POST /v1/events delivers it. */
export function sendEvent(h: Harness, input: EventInput, workspace = WAIT_WS) {
  return ingestEvent(input, { db: h.rt.db, queue: h.queue, vars: env as never, workspace, source: null, now: h.clock.now() });
}

/** Starts an execution of `definition` and delivers its wait's first message: the step registers and parks. */
export async function startParked(h: Harness, definition: WorkflowDefinitionInput, order: string | number) {
  const wf = await seedWorkflow(WAIT_WS, definition);
  const id = await h.start(wf, { order });
  const first = h.queue.take().find((m) => m.body.executionId === id)!;
  await h.deliver([first.body]);
  return { wf, id };
}
