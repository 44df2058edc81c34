/**
 * What `GET /v1/executions/{id}` says of an execution whose rows are gone and whose trace cannot be
 * read (404 `execution-not-retained`): besides when and why, the tombstone's facts — its workflow,
 * final status, when it was created, finished and removed (`tombstone`, the schema's
 * RemovedExecution) — so the inspector's page of an erased execution can say what remains.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { executionRow, tombstoneOf } from "./helpers";
import { callApp, chargeWorkflow, executionStatus, harness, seedWorkflow, unique } from "../steps/helpers";

const WS = "dev"; // dev-token's workspace

beforeEach(() => {
  for (const level of ["warn", "error", "info", "log"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => vi.restoreAllMocks());

describe("GET of an erased execution", () => {
  it("answers 404 execution-not-retained with what its tombstone keeps", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 12 } });
    await h.drain();
    expect(await executionStatus(id)).toBe("COMPLETED");
    const row = (await executionRow(id))!;
    expect((await callApp(h, "DELETE", `/v1/executions/${id}`, { key: unique("erase") })).status).toBe(200);
    const removedAt = (await tombstoneOf(id))!.removed_at as number;

    const read = await callApp(h, "GET", `/v1/executions/${id}`);
    expect(read.status).toBe(404);
    const problem = (await read.json()) as Record<string, unknown>;
    expect(problem).toMatchObject({ code: "execution-not-retained", executionId: id, reason: "erased", archived: false });
    expect(problem.tombstone).toEqual({
      executionId: id,
      workflowId: wf.workflowId,
      status: "COMPLETED",
      createdAt: new Date(row.createdAt).toISOString(),
      finishedAt: new Date(row.finishedAt).toISOString(),
      removedAt: new Date(removedAt).toISOString(),
      reason: "erased",
      archived: false,
    });
  });
});
