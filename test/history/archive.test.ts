/**
 * The history archive (SPEC section 12, docs/history-archive.md): the sweep writes each trace to R2
 * (gzip) before deleting its rows, and `GET /v1/executions/{id}` answers it from there with
 * `"archived": true` — the very object it served before the sweep. A write that fails keeps the rows;
 * a sweep interrupted between the write and the delete completes on its next pass with one object.
 * Real D1 (under its production limits) and the pool's local R2 bucket (wrangler.toml's `ARCHIVE`);
 * executions are made due by moving the clock, never by sleeping.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { ARCHIVE_LIMITS, ARCHIVE_READ_QUERIES, archiveKey, archiverFor, createArchiver, gzip } from "../../src/history/archive";
import { ARCHIVE_RETRY_MS } from "../../src/history/sweep";
import { readTraceRecords, selectDueChains } from "../../src/ledger";
import { readTraceRecordsForSet, TRACE_SET_QUERIES } from "../../src/ledger";
import { buildTrace } from "../../src/steps/trace";
import { countingD1 } from "../helpers/counting-d1";
import { DAY, executionRow, rowsOf, sweepAt, tombstoneOf } from "./helpers";
import { callApp, chargeWorkflow, executionStatus, failedCharge, harness, seedWorkflow, unique, type Harness } from "../steps/helpers";

const WS = "dev"; // dev-token's workspace

const archive = () => archiverFor(env, env.DB);

async function inflate(body: ReadableStream<Uint8Array>): Promise<unknown> {
  return JSON.parse(await new Response(body.pipeThrough(new DecompressionStream("gzip"))).text());
}

async function objectsUnder(prefix: string): Promise<string[]> {
  return (await env.ARCHIVE.list({ prefix })).objects.map((o) => o.key);
}

/** A completed charge whose first attempt failed (a retry, attempts and events on record). */
async function completedWithRetry(h: Harness) {
  const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
  const id = await h.start(wf, { order: { id: unique("O"), total: 12 } });
  h.dest.fault("/payments/charges", 500, 1);
  await h.drain();
  expect(await executionStatus(id)).toBe("COMPLETED");
  return { wf, id };
}

/** A completed execution started by the trigger route (an identity, and a duplicate trigger it absorbed). */
async function triggeredWithDuplicate(h: Harness) {
  const wf = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
  const payload = { order: { id: unique("T"), total: 7 } };
  const started = (await (await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload })).json()) as {
    executionId: string;
  };
  await callApp(h, "POST", `/v1/workflows/${wf.workflowId}/trigger`, { body: payload });
  await h.drain();
  expect(await executionStatus(started.executionId)).toBe("COMPLETED");
  return started.executionId;
}

const traceOf = async (h: Harness, id: string, token?: string) => callApp(h, "GET", `/v1/executions/${id}`, { token });

/** When every execution named has passed its retention (the defaults: 7 days completed, 30 failed). */
async function dueAfter(...ids: string[]): Promise<number> {
  let due = 0;
  for (const id of ids) due = Math.max(due, (await executionRow(id))!.finishedAt + 31 * DAY);
  return due;
}

describe("the history archive", () => {
  it("the pool binds the archive bucket, and the deployment's vars turn the archive on", () => {
    expect(env.ARCHIVE).toBeDefined();
    expect(env.HISTORY_ARCHIVE).toBe("on");
    expect(archive()).not.toBeNull();
    expect(archiverFor({ ...env, HISTORY_ARCHIVE: "off" } as unknown as Env, env.DB)).toBeNull();
    expect(archiverFor({ ...env, ARCHIVE: undefined } as unknown as Env, env.DB)).toBeNull();
  });

  it("the archived trace is the trace served before the sweep, deep-equal but `archived: true`", async () => {
    const h = harness();
    const retried = await completedWithRetry(h);
    const failed = await failedCharge(h, WS);
    const triggered = await triggeredWithDuplicate(h);
    const ids = [retried.id, failed.id, triggered];
    const before = new Map<string, unknown>();
    for (const id of ids) {
      const response = await traceOf(h, id);
      expect(response.status).toBe(200);
      before.set(id, await response.json());
    }
    // The fixtures carry what a trace can: attempts, events, a duplicate trigger and a dedupe window.
    const triggeredBefore = before.get(triggered) as { duplicateTriggers: unknown[]; dedupeWindowEnd: string | null };
    expect(triggeredBefore.duplicateTriggers).toHaveLength(1);
    expect(triggeredBefore.dedupeWindowEnd).not.toBeNull();
    const rows = new Map<string, Awaited<ReturnType<typeof executionRow>>>();
    for (const id of ids) rows.set(id, await executionRow(id));

    const { report } = await sweepAt(await dueAfter(...ids), { archive: archive() });
    expect(report.archiveFailed).toBe(0);
    expect(report.archived).toBeGreaterThanOrEqual(3);

    for (const id of ids) {
      expect((await rowsOf(id)).executions).toBe(0);
      expect(await tombstoneOf(id)).toMatchObject({ workspace: WS, reason: "retention", archived: 1 });
      const response = await traceOf(h, id);
      expect(response.status).toBe(200);
      const removedAt = (await tombstoneOf(id))!.removed_at as number;
      expect(response.headers.get("execution-removed-at")).toBe(new Date(removedAt).toISOString());
      const served = await response.json();
      expect(served).toEqual({ ...(before.get(id) as object), archived: true });
      // The object itself: gzip JSON under the stated key, the same document.
      const object = await env.ARCHIVE.get(archiveKey(rows.get(id)!));
      expect(object).not.toBeNull();
      expect(object!.httpMetadata?.contentType).toBe("application/gzip");
      expect(object!.customMetadata).toMatchObject({ workspace: WS, executionId: id, createdAt: String(rows.get(id)!.createdAt) });
      expect(await inflate(object!.body)).toEqual(served);
    }
    // Another workspace's token reads nothing of it: a plain 404, as for any unknown id.
    const other = await traceOf(h, retried.id, "other-token");
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ code: "not-found" });
  });

  it("the object key names workspace, execution and creation time, each segment encoded", () => {
    expect(archiveKey({ workspace: "dev", id: "a/b c", createdAt: 1_900_000_000_000 })).toBe(
      "executions/dev/a%2Fb%20c/1900000000000.json.gz",
    );
  });

  it("an archive write that fails keeps the rows: nothing is removed that was not archived", async () => {
    const h = harness();
    const { id } = await completedWithRetry(h);
    const before = await rowsOf(id);
    const failing = new Proxy(env.ARCHIVE, {
      get(target, name) {
        if (name === "put") return () => Promise.reject(new Error("simulated R2 outage"));
        const value = Reflect.get(target, name) as unknown;
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const now = await dueAfter(id);
    const { report } = await sweepAt(now, { archive: createArchiver(failing, env.DB) });
    expect(report.archiveFailed).toBeGreaterThanOrEqual(1);
    expect(await rowsOf(id)).toEqual(before);
    expect(await tombstoneOf(id)).toBeNull();
    expect((await traceOf(h, id)).status).toBe(200); // still served from D1
    // Held a while (not retried every minute of an outage): the next sweep after that archives it and removes it.
    expect((await selectDueChains(env.DB, now, 100)).chains.flat().map((e) => e.id)).not.toContain(id);
    const again = await sweepAt(now + ARCHIVE_RETRY_MS, { archive: archive() });
    expect(again.report.archiveFailed).toBe(0);
    expect((await rowsOf(id)).executions).toBe(0);
    expect(await tombstoneOf(id)).toMatchObject({ archived: 1 });
  });

  it("a sweep interrupted between the archive write and the delete completes on its next pass, with one object", async () => {
    const h = harness();
    const { id } = await completedWithRetry(h);
    const row = (await executionRow(id))!;
    const served = await (await traceOf(h, id)).json();
    const now = await dueAfter(id);
    // The first pass: the archive written, then the "crash" — no removal.
    const chain = (await selectDueChains(env.DB, now, 100)).chains.find((c) => c.some((e) => e.id === id))!;
    const written = await archive()!(chain);
    expect(written.has(id)).toBe(true);
    expect((await rowsOf(id)).executions).toBe(1);
    const prefix = `executions/${WS}/${encodeURIComponent(id)}/`;
    expect(await objectsUnder(prefix)).toEqual([archiveKey(row)]);
    // The next full pass writes the same key again and removes the rows.
    const { report } = await sweepAt(now, { archive: archive() });
    expect(report.archiveFailed).toBe(0);
    expect((await rowsOf(id)).executions).toBe(0);
    expect(await objectsUnder(prefix)).toEqual([archiveKey(row)]);
    expect(await (await traceOf(h, id)).json()).toEqual({ ...(served as object), archived: true });
  });

  it("a trace over the size caps stays in D1 and is logged; a call reads at most its parts, the rest waits", async () => {
    const h = harness();
    const a = await completedWithRetry(h);
    const b = await completedWithRetry(h);
    const c = await completedWithRetry(h);
    const now = await dueAfter(a.id, b.id, c.id);
    const chains = (await selectDueChains(env.DB, now, 100)).chains.flat().filter((e) => [a.id, b.id, c.id].includes(e.id));
    expect(chains).toHaveLength(3);
    const logged: string[] = [];
    const warn = console.warn;
    console.warn = (line: string) => void logged.push(line);
    try {
      // JSON cap: refused by the estimate, never read.
      const tiny = createArchiver(env.ARCHIVE, env.DB, { ...ARCHIVE_LIMITS, maxTraceJsonBytes: 1_000 });
      expect([...(await tiny(chains))]).toEqual([]);
      // Gzip cap: read and encoded, refused before the put.
      const small = createArchiver(env.ARCHIVE, env.DB, { ...ARCHIVE_LIMITS, maxObjectBytes: 100 });
      expect([...(await small(chains))]).toEqual([]);
    } finally {
      console.warn = warn;
    }
    const events = logged.map((l) => JSON.parse(l) as { event: string; executionId: string; reason: string });
    expect(events.every((e) => e.event === "history.archive_failed")).toBe(true);
    const refused = (pattern: RegExp) =>
      events
        .filter((e) => pattern.test(e.reason))
        .map((e) => e.executionId)
        .sort();
    expect(refused(/^its trace is estimated at \d+ bytes, over 1000$/)).toEqual([a.id, b.id, c.id].sort());
    expect(refused(/^its trace compresses to more than 100 bytes$/)).toEqual([a.id, b.id, c.id].sort());
    for (const e of chains) expect(await env.ARCHIVE.head(archiveKey(e))).toBeNull();
    // One part of one trace per call: the first is written, the others wait (not failed, not read).
    const counted = countingD1(env.DB);
    const onePart = createArchiver(env.ARCHIVE, counted.db, { ...ARCHIVE_LIMITS, partBytes: 1, maxParts: 1 });
    expect([...(await onePart(chains))]).toEqual([chains[0]!.id]);
    expect(counted.statements()).toBe(1 + TRACE_SET_QUERIES + 1); // the size estimate, one part, the erased-meanwhile check
    for (const id of [a.id, b.id, c.id]) expect((await rowsOf(id)).executions).toBe(1);
  });

  it("the set read gives each execution the records the single read gives it: one batch, whatever the set's size", async () => {
    const h = harness();
    const ids = [(await completedWithRetry(h)).id, (await failedCharge(h, WS)).id, await triggeredWithDuplicate(h)];
    for (let i = 0; i < 20; i++) ids.push((await completedWithRetry(h)).id);
    const refs = ids.map((id) => ({ id, workspace: WS }));
    const counted = countingD1(env.DB);
    const set = await readTraceRecordsForSet(counted.db, [...refs, { id: ids[0]!, workspace: "other" }, { id: "nope", workspace: WS }]);
    expect(counted.roundTrips()).toBe(1);
    expect(counted.statements()).toBe(TRACE_SET_QUERIES);
    expect([...set.keys()].sort()).toEqual([...ids].sort());
    for (const id of ids) {
      const single = await readTraceRecords(env.DB, WS, id);
      expect(set.get(id)).toEqual(single);
      expect(buildTrace(set.get(id)!)).toEqual(buildTrace(single!));
    }
    // Another workspace's ref reads nothing.
    expect((await readTraceRecordsForSet(env.DB, [{ id: ids[0]!, workspace: "other" }])).size).toBe(0);
    expect(ARCHIVE_READ_QUERIES).toBe(1 + TRACE_SET_QUERIES * ARCHIVE_LIMITS.maxParts + 1);
  });

  it("measures a typical archived trace: gzip bytes against JSON bytes", async () => {
    const h = harness();
    const { id } = await completedWithRetry(h);
    const trace = { ...((await (await traceOf(h, id)).json()) as object), archived: true };
    const json = new TextEncoder().encode(JSON.stringify(trace));
    const gz = (await gzip(json, ARCHIVE_LIMITS.maxObjectBytes))!;
    console.log(JSON.stringify({ measured: "archived trace", steps: 3, jsonBytes: json.byteLength, gzipBytes: gz.byteLength }));
    expect(gz.byteLength).toBeLessThan(json.byteLength / 2);
  });
});
