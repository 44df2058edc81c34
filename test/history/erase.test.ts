/**
 * Erasure and removed executions over HTTP (SPEC section 12, docs/history-archive.md):
 * `DELETE /v1/executions/{id}` removes a finished execution — with its start-over / reuse chain —
 * from D1 and from the archive, behind a required Idempotency-Key; a RUNNING member refuses it;
 * another workspace's id is a 404 that deletes nothing. A removed execution is read-only: its
 * actions and its event stream answer 410; without an archive copy `GET` answers 404 saying when
 * and why it went. Real D1 and the pool's local R2 bucket; the clock is moved, never slept.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { archiveKey, archiverFor } from "../../src/history/archive";
import { selectDueChains } from "../../src/ledger";
import { DAY, executionRow, GONE, rowsOf, sweepAt, tombstoneOf } from "./helpers";
import { callApp, chargeWorkflow, executionStatus, failedCharge, harness, seedWorkflow, unique, type Harness } from "../steps/helpers";

const WS = "dev"; // dev-token's workspace

const archive = () => archiverFor(env, env.DB);

async function completed(h: Harness) {
  const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
  const id = await h.start(wf, { order: { id: unique("O"), total: 12 } });
  await h.drain();
  expect(await executionStatus(id)).toBe("COMPLETED");
  return { wf, id };
}

const erase = (h: Harness, id: string, init: { key?: string; token?: string } = {}) =>
  callApp(h, "DELETE", `/v1/executions/${id}`, { key: init.key ?? unique("erase"), token: init.token });

/** Writes the execution's archive object the way the sweep does, without removing its rows (a sweep that crashed there). */
async function archiveOnly(id: string) {
  const row = (await executionRow(id))!;
  const due = (await selectDueChains(env.DB, row.finishedAt + 31 * DAY, 1000)).chains.flat().find((e) => e.id === id)!;
  expect((await archive()!([due])).has(id)).toBe(true);
  return row;
}

/** The execution swept at its due time (with the archive, or without). */
async function swept(id: string, withArchive: boolean) {
  const row = (await executionRow(id))!;
  await sweepAt(row.finishedAt + 31 * DAY, { archive: withArchive ? archive() : null });
  expect((await rowsOf(id)).executions).toBe(0);
  return row;
}

describe("DELETE /v1/executions/{id}", () => {
  it("removes the rows and the archive object; the same Idempotency-Key replays the first answer", async () => {
    const h = harness();
    const { id } = await completed(h);
    const row = await archiveOnly(id); // an object exists beside the rows
    expect(await env.ARCHIVE.head(archiveKey(row))).not.toBeNull();

    const key = unique("erase");
    const first = await erase(h, id, { key });
    expect(first.status).toBe(200);
    const body = await first.json();
    expect(body).toEqual({ erased: [id], archiveObjectsDeleted: 1 });
    expect(await rowsOf(id)).toEqual(GONE);
    expect(await env.ARCHIVE.head(archiveKey(row))).toBeNull();
    expect(await tombstoneOf(id)).toMatchObject({ workspace: WS, reason: "erased", archived: 0 });
    expect((await env.DB.prepare("PRAGMA foreign_key_check").all()).results).toEqual([]);

    const replay = await erase(h, id, { key });
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(await replay.json()).toEqual(body);

    // GET now says it was erased, and when; a new erasure of it finds nothing more to delete.
    const read = await callApp(h, "GET", `/v1/executions/${id}`);
    expect(read.status).toBe(404);
    const problem = (await read.json()) as { code: string; detail: string; reason: string };
    expect(problem).toMatchObject({ code: "execution-not-retained", reason: "erased" });
    expect(problem.detail).toMatch(/was erased on request on \d{4}-\d{2}-\d{2}T/);
    const erasedAt = (await tombstoneOf(id))!.removed_at;
    expect(await (await erase(h, id)).json()).toEqual({ erased: [id], archiveObjectsDeleted: 0 });
    expect((await tombstoneOf(id))!.removed_at).toBe(erasedAt); // the first erasure's date stands
  });

  it("requires an Idempotency-Key", async () => {
    const h = harness();
    const { id } = await completed(h);
    const response = await callApp(h, "DELETE", `/v1/executions/${id}`);
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: "idempotency-key-missing" });
    expect((await rowsOf(id)).executions).toBe(1);
  });

  it("a trigger inside the window of an erased execution is still its duplicate: 200, nothing runs again", async () => {
    const h = harness();
    h.clock.t = Date.now(); // the trigger route's clock is the wall clock
    const def = chargeWorkflow(unique("wf"));
    def.vertices[0] = { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id" } };
    const wf = await seedWorkflow(WS, def);
    const payload = { order: { id: unique("E"), total: 7 } };
    const trigger = () => callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload });
    const first = (await (await trigger()).json()) as { executionId: string };
    await h.drain();
    const charges = h.dest.effects.length;
    expect((await callApp(h, "DELETE", `/v1/executions/${first.executionId}`, { key: unique("erase") })).status).toBe(200);
    const again = await trigger();
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ executionId: first.executionId, deduplicated: true, status: "COMPLETED" });
    expect(h.queue.pending).toEqual([]);
    await h.drain();
    expect(h.dest.effects.length).toBe(charges);
    expect((await rowsOf(first.executionId)).executions).toBe(0);
  });

  it("a RUNNING execution answers 409 naming it, and nothing is erased", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    const id = await h.start(wf, { order: { id: unique("O"), total: 1 } }); // its charge never delivered
    h.queue.take();
    const before = await rowsOf(id);
    const response = await erase(h, id);
    expect(response.status).toBe(409);
    expect(await response.json()).toMatchObject({ code: "execution-chain-running", running: [id] });
    expect(await rowsOf(id)).toEqual(before);
    expect(await tombstoneOf(id)).toBeNull();
  });

  it("takes the whole start-over chain; a RUNNING member of it refuses the erasure of any member", async () => {
    const h = harness();
    const { wf, id: failed } = await failedCharge(h, WS);
    const again = await h.startOver(wf, { order: { id: unique("O"), total: 12 } }, failed);
    h.queue.take(); // the start over is RUNNING
    const refused = await erase(h, failed);
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ code: "execution-chain-running", running: [again.executionId] });
    expect((await rowsOf(failed)).executions).toBe(1);

    await callApp(h, "POST", `/v1/executions/${again.executionId}/cancel`, { key: unique("op") });
    const response = await erase(h, again.executionId);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { erased: string[]; archiveObjectsDeleted: number };
    expect(body.erased.sort()).toEqual([failed, again.executionId].sort());
    expect(await rowsOf(failed)).toEqual(GONE);
    expect(await rowsOf(again.executionId)).toEqual(GONE);
    expect((await env.DB.prepare("PRAGMA foreign_key_check").all()).results).toEqual([]);
  });

  it("an execution already swept: its archive objects go (an earlier run's under its id too); its tombstone says erased", async () => {
    const h = harness();
    const { id } = await completed(h);
    const row = await swept(id, true);
    expect(await env.ARCHIVE.head(archiveKey(row))).not.toBeNull();
    expect((await callApp(h, "GET", `/v1/executions/${id}`)).status).toBe(200);
    // An earlier run of the same trigger had the same id (its tombstone long expired): its object goes too.
    const earlier = { ...row, createdAt: row.createdAt - 400 * DAY };
    await env.ARCHIVE.put(archiveKey(earlier), "earlier run");
    const otherWorkspace = { ...row, workspace: "other" };
    await env.ARCHIVE.put(archiveKey(otherWorkspace), "another workspace's object");
    const response = await erase(h, id);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ erased: [id], archiveObjectsDeleted: 2 });
    expect(await env.ARCHIVE.head(archiveKey(row))).toBeNull();
    expect(await env.ARCHIVE.head(archiveKey(earlier))).toBeNull();
    expect(await env.ARCHIVE.head(archiveKey(otherWorkspace))).not.toBeNull();
    expect(await tombstoneOf(id)).toMatchObject({ reason: "erased", archived: 0 });
    const read = await callApp(h, "GET", `/v1/executions/${id}`);
    expect(read.status).toBe(404);
    expect(await read.json()).toMatchObject({ code: "execution-not-retained", reason: "erased", archived: false });
  });

  it("after its tombstone expired: GET still finds the archived trace (another workspace's does not), and DELETE erases it", async () => {
    const h = harness();
    const { id } = await completed(h);
    const served = await (await callApp(h, "GET", `/v1/executions/${id}`)).json();
    await swept(id, true);
    await env.DB.prepare("DELETE FROM execution_tombstones WHERE id = ?1").bind(id).run(); // its tombstone swept
    const read = await callApp(h, "GET", `/v1/executions/${id}`);
    expect(read.status).toBe(200);
    expect(await read.json()).toEqual({ ...(served as object), archived: true });
    expect(read.headers.get("execution-removed-at")).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect((await callApp(h, "GET", `/v1/executions/${id}`, { token: "other-token" })).status).toBe(404);
    expect((await erase(h, id, { token: "other-token" })).status).toBe(404);
    const erased = await erase(h, id);
    expect(erased.status).toBe(200);
    expect(await erased.json()).toEqual({ erased: [id], archiveObjectsDeleted: 1 });
    expect((await callApp(h, "GET", `/v1/executions/${id}`)).status).toBe(404);
  });

  it("another workspace's id answers 404 for GET and DELETE, and nothing is deleted: not the rows, not the object", async () => {
    const h = harness();
    const live = await completed(h);
    const liveRows = await rowsOf(live.id);
    const liveObject = await archiveOnly(live.id);
    const other = await erase(h, live.id, { token: "other-token" });
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ code: "not-found" });
    expect(await rowsOf(live.id)).toEqual(liveRows);
    expect(await env.ARCHIVE.head(archiveKey(liveObject))).not.toBeNull();
    expect(await tombstoneOf(live.id)).toBeNull();

    const gone = await completed(h);
    const goneRow = await swept(gone.id, true);
    const tombstone = await tombstoneOf(gone.id);
    for (const [method, key] of [
      ["GET", undefined],
      ["DELETE", unique("erase")],
    ] as const) {
      const response = await callApp(h, method, `/v1/executions/${gone.id}`, { token: "other-token", key });
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ code: "not-found" });
    }
    expect(await env.ARCHIVE.head(archiveKey(goneRow))).not.toBeNull();
    expect(await tombstoneOf(gone.id)).toEqual(tombstone);
    expect((await callApp(h, "GET", `/v1/executions/${gone.id}`)).status).toBe(200); // its own workspace still reads it
  });
});

describe("a removed execution is read-only", () => {
  it("retry, start over, cancel and the event stream answer 410 execution-removed; GET answers the archived trace", async () => {
    const h = harness();
    const { id } = await failedCharge(h, WS);
    const row = await swept(id, true);
    const actions = [
      callApp(h, "POST", `/v1/executions/${id}/steps/charge/retry`, { key: unique("op") }),
      callApp(h, "POST", `/v1/executions/${id}/start-over`, { key: unique("op") }),
      callApp(h, "POST", `/v1/executions/${id}/cancel`, { key: unique("op") }),
      callApp(h, "GET", `/v1/executions/${id}/events`),
    ];
    for (const response of await Promise.all(actions)) {
      expect(response.status).toBe(410);
      const problem = (await response.json()) as { code: string; detail: string; archived: boolean; removedAt: string };
      expect(problem).toMatchObject({ code: "execution-removed", archived: true, executionId: id, reason: "retention" });
      expect(problem.detail).toContain(
        `was removed by retention on ${new Date((await tombstoneOf(id))!.removed_at as number).toISOString()}`,
      );
    }
    // Nothing was started or changed by them.
    expect(h.queue.pending).toEqual([]);
    const trace = (await (await callApp(h, "GET", `/v1/executions/${id}`)).json()) as { archived: boolean; status: string };
    expect(trace).toMatchObject({ archived: true, status: "FAILED" });
    expect(await env.ARCHIVE.head(archiveKey(row))).not.toBeNull();
    // Another workspace still sees a plain 404 on the actions.
    const other = await callApp(h, "POST", `/v1/executions/${id}/cancel`, { key: unique("op"), token: "other-token" });
    expect(other.status).toBe(404);
  });

  it("without an archive copy, GET answers 404 execution-not-retained saying it was removed by retention, and when", async () => {
    const h = harness();
    const { id } = await completed(h);
    await swept(id, false);
    const tombstone = (await tombstoneOf(id))!;
    expect(tombstone).toMatchObject({ reason: "retention", archived: 0 });
    const response = await callApp(h, "GET", `/v1/executions/${id}`);
    expect(response.status).toBe(404);
    const problem = (await response.json()) as { code: string; detail: string };
    expect(problem.code).toBe("execution-not-retained");
    expect(problem.detail).toContain(`was removed by retention on ${new Date(tombstone.removed_at as number).toISOString()}`);
    expect(problem.detail).toContain("not archived");
  });
});
