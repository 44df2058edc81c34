import { stepsWithEntry } from "../../src/ledger/entry-step";
import { createExecutionContext, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { windowExecutionId } from "../../src/ingress/identity";
import { cachedWorkflow } from "../../src/ingress/workflow-cache";
import { BASE, countRows, jsonRequest, seedWorkflow, transformWorkflow, unique } from "./helpers";

const trigger = (
  workflowId: string,
  body: unknown,
  opts: { token?: string; query?: string; raw?: string; headers?: Record<string, string> } = {},
) =>
  SELF.fetch(
    jsonRequest(`${BASE}/v1/workflows/${workflowId}/trigger${opts.query ?? ""}`, body, {
      token: opts.token ?? "dev-token",
      raw: opts.raw,
      headers: opts.headers,
    }),
  );

const executionsOf = (workflowId: string, workspace = "dev") =>
  countRows("SELECT count(*) AS n FROM executions WHERE workspace = ? AND workflow_id = ?", workspace, workflowId);

/** Through the app in THIS isolate, so the test can see (and rely on) its workflow cache. */
async function triggerInThisIsolate(workflowId: string, raw: string) {
  const ctx = createExecutionContext();
  const res = await app.fetch(jsonRequest(`${BASE}/v1/workflows/${workflowId}/trigger`, null, { token: "dev-token", raw }), env, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

/** A JSON body of exactly `bytes` bytes; `fill` keeps bodies of one size apart (content identity). */
const bodyOfBytes = (bytes: number, fill: string) => JSON.stringify({ pad: fill.repeat(bytes - '{"pad":""}'.length) });

describe("POST /v1/workflows/:id/trigger", () => {
  it("starts exactly one execution for 50 truly concurrent identical triggers, and shows the 49 duplicates", async () => {
    const id = unique("race");
    await seedWorkflow("dev", transformWorkflow(id));
    const responses = await Promise.all(Array.from({ length: 50 }, () => trigger(id, { order: { id: "A-1" } })));
    const bodies = await Promise.all(
      responses.map((r) => r.json<{ executionId: string; deduplicated: boolean; identity: string; status: string }>()),
    );

    expect(responses.filter((r) => r.status === 202)).toHaveLength(1);
    expect(responses.filter((r) => r.status === 200)).toHaveLength(49);
    expect(bodies.filter((b) => b.deduplicated)).toHaveLength(49);
    expect(new Set(bodies.map((b) => b.executionId)).size).toBe(1);
    for (const b of bodies) expect(Object.keys(b).sort()).toEqual(["deduplicated", "executionId", "identity", "status"]);
    expect(bodies[0]!.identity).toBe("content");

    expect(await executionsOf(id)).toBe(1);
    const executionId = bodies[0]!.executionId;
    // One set of first steps: the entry's one successor, once (the entry has no row: migrations/0045).
    expect(await countRows("SELECT count(*) AS n FROM steps WHERE execution_id = ?", executionId)).toBe(1);
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE id = ? AND entry_next IS NOT NULL", executionId)).toBe(1);
    const row = await env.DB.prepare("SELECT duplicate_deliveries, last_duplicate_at FROM executions WHERE id = ?")
      .bind(executionId)
      .first<{ duplicate_deliveries: number; last_duplicate_at: number }>();
    expect(row?.duplicate_deliveries).toBe(49);
    expect(row?.last_duplicate_at).toBeGreaterThan(0);
  });

  it("answers a duplicate with 200, the same executionId, its current status and deduplicated: true", async () => {
    const id = unique("dup");
    await seedWorkflow("dev", transformWorkflow(id));
    const first = await trigger(id, { a: 1 });
    expect(first.status).toBe(202);
    const created = await first.json<{ executionId: string; deduplicated: boolean; status: string }>();
    expect(created).toMatchObject({ deduplicated: false, status: "RUNNING", identity: "content" });
    expect(first.headers.get("location")).toBe(`/v1/executions/${created.executionId}`);

    // The queue consumer runs the step concurrently, so the execution may finish at any moment:
    // the duplicate's answer must carry the status as it was between these two reads.
    const statusNow = async () =>
      (await env.DB.prepare("SELECT status FROM executions WHERE id = ?").bind(created.executionId).first<{ status: string }>())!.status;
    const before = await statusNow();
    const again = await trigger(id, { a: 1 });
    expect(again.status).toBe(200);
    const after = await statusNow();
    const body = await again.json<{ status: string }>();
    expect(body).toEqual({ executionId: created.executionId, deduplicated: true, identity: "content", status: body.status });
    expect([before, after]).toContain(body.status);
  });

  it("treats JSON bodies that differ only in key order and whitespace as one execution", async () => {
    const id = unique("jcs");
    await seedWorkflow("dev", transformWorkflow(id));
    const a = await (await trigger(id, null, { raw: '{"a":1,"b":2}' })).json<{ executionId: string }>();
    const b = await trigger(id, null, { raw: '{ "b": 2,\n  "a": 1 }' });
    expect(b.status).toBe(200);
    expect((await b.json<{ executionId: string }>()).executionId).toBe(a.executionId);
    expect(await executionsOf(id)).toBe(1);
  });

  it("derives the execution id from the identity hash and the window's start: stable for the window, never the bare identity", async () => {
    const id = unique("stable");
    await seedWorkflow("dev", transformWorkflow(id));
    const body = await (await trigger(id, { x: 1 })).json<{ executionId: string }>();
    expect(body.executionId).toMatch(/^[0-9a-f]{64}$/);
    const row = await env.DB.prepare("SELECT identity, created_at AS createdAt FROM executions WHERE id = ?")
      .bind(body.executionId)
      .first<{ identity: string; createdAt: number }>();
    // An id is never given twice (docs/history.md "Tombstones and ids"): the bare identity would come back once its tombstone went.
    expect(row!.identity).not.toBe(body.executionId);
    expect(body.executionId).toBe(await windowExecutionId(row!.identity, row!.createdAt));
  });

  it("with idempotencyFields, merges bodies that differ elsewhere and splits different ids", async () => {
    const id = unique("fields");
    await seedWorkflow("dev", transformWorkflow(id, { idempotencyFields: "order.id" }));
    const first = await (
      await trigger(id, { order: { id: "A-1", total: 10 }, note: "first" })
    ).json<{ executionId: string; identity: string }>();
    expect(first.identity).toBe("fields");
    const same = await trigger(id, { order: { id: "A-1", total: 99 }, note: "retry with drift" });
    expect(same.status).toBe(200);
    expect((await same.json<{ executionId: string }>()).executionId).toBe(first.executionId);
    const other = await trigger(id, { order: { id: "A-2", total: 10 }, note: "first" });
    expect(other.status).toBe(202);
    expect((await other.json<{ executionId: string }>()).executionId).not.toBe(first.executionId);
    expect(await executionsOf(id)).toBe(2);
  });

  it("selects several idempotencyFields in any listed order", async () => {
    const id = unique("fields2");
    await seedWorkflow("dev", transformWorkflow(id, { idempotencyFields: ["customer", "order.id"] }));
    const a = await (await trigger(id, { customer: "c1", order: { id: 7 } })).json<{ executionId: string }>();
    const b = await trigger(id, { order: { id: 7, extra: true }, customer: "c1" });
    expect((await b.json<{ executionId: string }>()).executionId).toBe(a.executionId);
    expect((await trigger(id, { customer: "c2", order: { id: 7 } })).status).toBe(202);
  });

  it("rejects a payload lacking a selected field with 422 naming the field, and writes nothing", async () => {
    const id = unique("missing");
    await seedWorkflow("dev", transformWorkflow(id, { idempotencyFields: ["order.id", "customer"] }));
    const res = await trigger(id, { order: { total: 10 }, customer: "c1" });
    expect(res.status).toBe(422);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    const problem = await res.json<{ code: string; detail: string; fields: string[] }>();
    expect(problem.code).toBe("idempotency-field-missing");
    expect(problem.fields).toEqual(["order.id"]);
    expect(problem.detail).toContain("order.id");
    // null would collapse every such delivery into one shared identity: also missing.
    expect((await trigger(id, { order: { id: null }, customer: "c1" })).status).toBe(422);
    expect(await executionsOf(id)).toBe(0);
  });

  it("answers 415 when fields must be selected from a body that is not JSON", async () => {
    const id = unique("nonjson");
    await seedWorkflow("dev", transformWorkflow(id, { idempotencyFields: "order.id" }));
    const res = await trigger(id, null, { raw: "order=1", headers: { "content-type": "application/x-www-form-urlencoded" } });
    expect(res.status).toBe(415);
    expect((await res.json<{ code: string }>()).code).toBe("idempotency-fields-need-json");
    expect(await executionsOf(id)).toBe(0);
  });

  it("dedupes non-JSON bodies on their raw bytes", async () => {
    const id = unique("bytes");
    await seedWorkflow("dev", transformWorkflow(id));
    const headers = { "content-type": "text/plain" };
    const a = await trigger(id, null, { raw: "hello", headers });
    expect(a.status).toBe(202);
    expect((await trigger(id, null, { raw: "hello", headers })).status).toBe(200);
    expect((await trigger(id, null, { raw: "hello ", headers })).status).toBe(202);
    // A JSON string with the same text is a different identity from the raw bytes.
    expect((await trigger(id, "hello")).status).toBe(202);
  });

  it("lets clientIdempotencyId win over idempotencyFields and the payload", async () => {
    const id = unique("client");
    await seedWorkflow("dev", transformWorkflow(id, { idempotencyFields: "order.id" }));
    const a = await trigger(id, { order: { id: "A-1" } }, { query: "?clientIdempotencyId=key-1" });
    const created = await a.json<{ executionId: string; identity: string }>();
    expect(a.status).toBe(202);
    expect(created.identity).toBe("client");
    // Different fields, different body, even no field at all: the client's id decides.
    const b = await trigger(id, { something: "else" }, { query: "?clientIdempotencyId=key-1" });
    expect(b.status).toBe(200);
    expect((await b.json<{ executionId: string }>()).executionId).toBe(created.executionId);
    const c = await trigger(id, { order: { id: "A-1" } }, { query: "?clientIdempotencyId=key-2" });
    expect(c.status).toBe(202);
    expect((await trigger(id, {}, { query: `?clientIdempotencyId=${"x".repeat(256)}` })).status).toBe(400);
    // The Idempotency-Key rule (src/lib/key-constraints.ts): 1–255 printable ASCII, both ends included.
    expect((await trigger(id, {}, { query: `?clientIdempotencyId=${"x".repeat(255)}` })).status).toBe(202);
    expect((await trigger(id, {}, { query: `?clientIdempotencyId=k%C3%A9y` })).status).toBe(400);
    expect((await trigger(id, {}, { query: `?clientIdempotencyId=k%09y` })).status).toBe(400);
  });

  it("keeps the same identity in two workspaces apart", async () => {
    const id = unique("ws");
    await seedWorkflow("dev", transformWorkflow(id));
    await seedWorkflow("other", transformWorkflow(id));
    const a = await trigger(id, { same: true }, { token: "dev-token" });
    const b = await trigger(id, { same: true }, { token: "other-token" });
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    const [ea, eb] = [await a.json<{ executionId: string }>(), await b.json<{ executionId: string }>()];
    expect(ea.executionId).not.toBe(eb.executionId);
  });

  it("refuses forceNewExecution on a production trigger with 400, whatever its value", async () => {
    const id = unique("force");
    await seedWorkflow("dev", transformWorkflow(id));
    for (const query of ["?forceNewExecution=true", "?forceNewExecution=false", "?forceNewExecution"]) {
      const res = await trigger(id, { a: 1 }, { query });
      expect(res.status).toBe(400);
      expect((await res.json<{ code: string }>()).code).toBe("force-new-execution-not-allowed");
    }
    expect(await executionsOf(id)).toBe(0);
  });

  it("answers 400 for malformed JSON and 413 over the entry point's limit, writing nothing", async () => {
    const id = unique("limits");
    await seedWorkflow("dev", transformWorkflow(id, { maxPayloadBytes: 64 }));
    const bad = await trigger(id, null, { raw: '{"a":' });
    expect(bad.status).toBe(400);
    expect((await bad.json<{ code: string }>()).code).toBe("malformed-json");
    const big = await trigger(id, { blob: "x".repeat(100) });
    expect(big.status).toBe(413);
    expect((await big.json<{ code: string }>()).code).toBe("payload-too-large");
    expect(await executionsOf(id)).toBe(0);
  });

  it(
    "applies a newly saved LOWER maxPayloadBytes at once, though this isolate still caches the older version: 413, nothing " + "recorded",
    async () => {
      const id = unique("lowered");
      const v1 = await seedWorkflow("dev", transformWorkflow(id, { maxPayloadBytes: 256 }));
      expect((await triggerInThisIsolate(id, bodyOfBytes(100, "w"))).status).toBe(202);
      // The precondition that makes this test mean something: the older version is cached.
      expect(cachedWorkflow("dev", id)?.version).toBe(v1.version);
      const v2 = await seedWorkflow("dev", transformWorkflow(id, { maxPayloadBytes: 64 }));
      expect(v2.version).not.toBe(v1.version);

      // 100 bytes: fits the cached version's 256, not the new 64.
      const res = await triggerInThisIsolate(id, bodyOfBytes(100, "b"));
      expect(res.status).toBe(413);
      expect(res.headers.get("content-type")).toBe("application/problem+json");
      expect(await res.json()).toMatchObject({ code: "payload-too-large", detail: expect.stringContaining("64 bytes") });
      expect(await executionsOf(id)).toBe(1); // the warm-up only
      // The new version is the one that runs from now on.
      const fits = await triggerInThisIsolate(id, bodyOfBytes(64, "f"));
      expect(fits.status).toBe(202);
      const { executionId } = await fits.json<{ executionId: string }>();
      expect(await env.DB.prepare("SELECT version FROM executions WHERE id = ?").bind(executionId).first("version")).toBe(v2.version);
    },
  );

  it("refuses a number a float cannot carry with one 422 naming its JSON Pointer, on every identity path, writing nothing", async () => {
    // Without the rule, the first two parse to the same float: one execution for two orders.
    const bodies: Array<[string, string, string]> = [
      ['{"order":{"id":12345678901234567891}}', "/order/id", "12345678901234567891"],
      ['{"order":{"id":12345678901234567892}}', "/order/id", "12345678901234567892"],
      ['{"order":{"id":1e20}}', "/order/id", "1e20"],
      [`{"order":{"id":${Number.MAX_SAFE_INTEGER + 1}}}`, "/order/id", "9007199254740992"],
      ['{"order":{"id":"A-1"},"lines":[{"qty":1},{"qty":1e400}]}', "/lines/1/qty", "1e400"],
      ['{"order":{"id":"A-1"},"b":[1,-1e999]}', "/b/1", "-1e999"],
    ];
    const paths: Array<[string, Record<string, unknown>, string]> = [
      ["content", {}, ""],
      ["fields", { idempotencyFields: "order.id" }, ""],
      ["client", {}, "?clientIdempotencyId=order-1"], // the payload is still stored and read by expressions
    ];
    for (const [label, entry, query] of paths) {
      const id = unique(`num-${label}`);
      await seedWorkflow("dev", transformWorkflow(id, entry));
      for (const [raw, pointer, number] of bodies) {
        const res = await trigger(id, null, { raw, query });
        expect(res.status, `${label} ${raw}`).toBe(422);
        expect(res.headers.get("content-type")).toBe("application/problem+json");
        const problem = await res.json<{ code: string; pointer: string; number: string; detail: string }>();
        expect(problem, `${label} ${raw}`).toMatchObject({ code: "json-number-out-of-range", pointer, number });
        expect(problem.detail).toContain(`\`${pointer}\``);
        expect(problem.detail).toContain("JSON string");
      }
      expect(await executionsOf(id)).toBe(0);
      expect(await countRows("SELECT count(*) AS n FROM execution_identities WHERE workflow_id = ?", id)).toBe(0);
    }
  });

  it("refuses such numbers on test and stream runs too, forced or deduplicated", async () => {
    const id = unique("num-runs");
    await seedWorkflow("dev", transformWorkflow(id, { idempotencyFields: "order.id" }));
    const raw = '{"order":{"id":12345678901234567891}}';
    for (const path of ["test-runs", "test-runs?forceNewExecution=false", "stream", "stream?forceNewExecution=false"]) {
      const res = await SELF.fetch(jsonRequest(`${BASE}/v1/workflows/${id}/${path}`, null, { token: "dev-token", raw }));
      expect(res.status, path).toBe(422);
      expect(await res.json(), path).toMatchObject({ code: "json-number-out-of-range", pointer: "/order/id" });
    }
    expect(await executionsOf(id)).toBe(0);
  });

  it("accepts MAX_SAFE_INTEGER, fractions, digits in strings and non-JSON bodies; ids sent as strings stay apart", async () => {
    const id = unique("num-ok");
    await seedWorkflow("dev", transformWorkflow(id));
    const accepted = [
      `{"order":{"id":${Number.MAX_SAFE_INTEGER}}}`,
      `{"order":{"id":-${Number.MAX_SAFE_INTEGER}}}`,
      '{"order":{"id":"12345678901234567891"},"note":"1e400 \\"12345678901234567892\\""}',
      '{"order":{"id":"12345678901234567892"}}',
      '{"price":0.1,"exact":4503599627370495.5,"tiny":1e-7,"12345678901234567893":[]}',
    ];
    const ids = new Set<string>();
    for (const raw of accepted) {
      const res = await trigger(id, null, { raw });
      expect(res.status, raw).toBe(202);
      ids.add((await res.json<{ executionId: string }>()).executionId);
    }
    expect(ids.size).toBe(accepted.length);
    // 1.0 is the number 1: the same payload, the same identity.
    const one = await (await trigger(id, null, { raw: '{"n":1}' })).json<{ executionId: string }>();
    const again = await trigger(id, null, { raw: '{"n":1.0}' });
    expect(again.status).toBe(200);
    expect((await again.json<{ executionId: string }>()).executionId).toBe(one.executionId);
    // A body that is not JSON is bytes: its digits are text, never numbers.
    const text = await trigger(id, null, { raw: '{"order":{"id":12345678901234567891}}', headers: { "content-type": "text/plain" } });
    expect(text.status).toBe(202);
    expect(await text.json()).toMatchObject({ identity: "content" });
  });

  it("refuses an empty idempotencyFields value with 422 naming the field, instead of making every such order one execution", async () => {
    const id = unique("empty");
    await seedWorkflow("dev", transformWorkflow(id, { idempotencyFields: ["order.id", "tenant"] }));
    for (const value of ['""', '"   "', '"\\t\\n"', "[]", "{}"]) {
      const res = await trigger(id, null, { raw: `{"order":{"id":${value}},"tenant":"t1"}` });
      expect(res.status, value).toBe(422);
      const problem = await res.json<{ code: string; fields: string[]; detail: string }>();
      expect(problem, value).toMatchObject({ code: "idempotency-field-empty", fields: ["order.id"] });
      expect(problem.detail).toContain("`order.id`");
    }
    expect(await executionsOf(id)).toBe(0);
    // Real values, however falsy, are identities: 0, false, a non-empty object holding "".
    for (const value of ["0", "false", '{"sub":""}', '" x "']) {
      expect((await trigger(id, null, { raw: `{"order":{"id":${value}},"tenant":"t1"}` })).status, value).toBe(202);
    }
    expect(await executionsOf(id)).toBe(4);
  });

  it("applies the default 1 MiB limit, and accepts a payload just under it", async () => {
    const id = unique("mib");
    await seedWorkflow("dev", transformWorkflow(id, {}, { edges: [{ from: "received", to: "shape", when: "= false" }] }));
    const res = await trigger(id, { blob: "x".repeat(1024 * 1024) });
    expect(res.status).toBe(413);
    const under = await trigger(id, { blob: "y".repeat(1024 * 1024 - 100) });
    expect(under.status).toBe(202);
  });

  it("needs a bearer token, and another workspace's workflow is 404", async () => {
    const id = unique("auth");
    await seedWorkflow("dev", transformWorkflow(id));
    const anonymous = await SELF.fetch(
      new Request(`${BASE}/v1/workflows/${id}/trigger`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } }),
    );
    expect(anonymous.status).toBe(401);
    expect((await trigger(id, {}, { token: "other-token" })).status).toBe(404);
  });

  it("completes the execution at once when every successor is skipped", async () => {
    const id = unique("skip");
    await seedWorkflow("dev", transformWorkflow(id, {}, { edges: [{ from: "received", to: "shape", when: "= payload.go = true" }] }));
    const res = await trigger(id, { go: false });
    const body = await res.json<{ executionId: string; status: string }>();
    expect(body.status).toBe("COMPLETED");
    // The entry as every reader of the steps sees it: its execution row (migrations/0045), its edge not taken.
    const steps = await env.DB.prepare(
      `SELECT vertex_id, state, epoch, attempt, output, next_vertices FROM ${stepsWithEntry("(?1)")} ORDER BY vertex_id`,
    )
      .bind(body.executionId)
      .all();
    expect(steps.results).toEqual([
      { vertex_id: "received", state: "COMPLETED", epoch: 0, attempt: 0, output: JSON.stringify({ go: false }), next_vertices: "[]" },
      { vertex_id: "shape", state: "SKIPPED", epoch: 0, attempt: 0, output: null, next_vertices: null },
    ]);
  });
});

describe("POST /v1/workflows/:id/trigger with an Idempotency-Key header", () => {
  it("replays the first answer for a retry with the same key, and refuses the key with another body", async () => {
    const id = unique("idemkey");
    await seedWorkflow("dev", transformWorkflow(id));
    const key = unique("key");
    const first = await trigger(id, { n: 1 }, { headers: { "idempotency-key": key } });
    expect(first.status).toBe(202);
    const body = await first.json<{ executionId: string }>();
    const retry = await trigger(id, { n: 1 }, { headers: { "idempotency-key": key } });
    expect(retry.status).toBe(202);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect((await retry.json<{ executionId: string }>()).executionId).toBe(body.executionId);
    const mismatch = await trigger(id, { n: 2 }, { headers: { "idempotency-key": key } });
    expect(mismatch.status).toBe(422);
    expect(await executionsOf(id)).toBe(1);
  });
});

describe("POST /v1/workflows/:id/test-runs", () => {
  const testRun = (workflowId: string, body: unknown, query = "", headers: Record<string, string> = {}) =>
    SELF.fetch(jsonRequest(`${BASE}/v1/workflows/${workflowId}/test-runs${query}`, body, { token: "dev-token", headers }));

  it("starts a new execution every time by default (forced identity)", async () => {
    const id = unique("test");
    await seedWorkflow("dev", transformWorkflow(id));
    const a = await testRun(id, { a: 1 });
    const b = await testRun(id, { a: 1 });
    expect([a.status, b.status]).toEqual([202, 202]);
    const [ea, eb] = [await a.json<{ executionId: string; identity: string }>(), await b.json<{ executionId: string }>()];
    expect(ea.identity).toBe("forced");
    expect(ea.executionId).not.toBe(eb.executionId);
    expect(await executionsOf(id)).toBe(2);
  });

  it("dedupes with forceNewExecution=false, but never against a production trigger", async () => {
    const id = unique("testdedupe");
    await seedWorkflow("dev", transformWorkflow(id));
    const production = await (await trigger(id, { a: 1 })).json<{ executionId: string }>();
    const first = await testRun(id, { a: 1 }, "?forceNewExecution=false");
    expect(first.status).toBe(202);
    const firstBody = await first.json<{ executionId: string; identity: string }>();
    expect(firstBody.identity).toBe("content");
    expect(firstBody.executionId).not.toBe(production.executionId);
    const second = await testRun(id, { a: 1 }, "?forceNewExecution=false");
    expect(second.status).toBe(200);
    expect((await second.json<{ executionId: string }>()).executionId).toBe(firstBody.executionId);
    expect((await testRun(id, { a: 1 }, "?forceNewExecution=maybe")).status).toBe(400);
  });

  it("with Prefer: wait=N waits for the steps to run on the queue and returns the finished trace", async () => {
    const id = unique("waitrun");
    await seedWorkflow("dev", transformWorkflow(id));
    const res = await testRun(id, { hello: "world" }, "", { prefer: "wait=10" });
    expect(res.status).toBe(200);
    const trace = await res.json<{ status: string; steps: Array<{ vertexId: string; state: string; output: unknown }> }>();
    expect(trace.status).toBe("COMPLETED");
    expect(trace.steps.find((s) => s.vertexId === "shape")).toMatchObject({ state: "COMPLETED", output: { seen: { hello: "world" } } });
  });

  it("with Prefer: wait=N returns the finished trace", async () => {
    const id = unique("wait");
    await seedWorkflow("dev", transformWorkflow(id, {}, { edges: [{ from: "received", to: "shape", when: "= false" }] }));
    const res = await testRun(id, { a: 1 }, "", { prefer: "wait=5" });
    expect(res.status).toBe(200);
    expect(res.headers.get("preference-applied")).toBe("wait=5");
    const trace = await res.json<{
      status: string;
      identity: string;
      deduplicated: boolean;
      steps: Array<{ vertexId: string; state: string }>;
    }>();
    expect(trace).toMatchObject({ status: "COMPLETED", identity: "forced", deduplicated: false });
    expect(trace.steps.map((s) => [s.vertexId, s.state])).toEqual([
      ["received", "COMPLETED"],
      ["shape", "SKIPPED"],
    ]);
  });
});
