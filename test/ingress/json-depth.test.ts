/**
 * JSON nested past MAX_JSON_DEPTH is refused where every body is parsed (src/lib/request-body.ts),
 * with one 400 on every way in, before anything is written. Without the check, 20,000 levels parse
 * and then overflow the stack in the canonicaliser, JSON.stringify or zod: a 500 on every route.
 */
import { env, SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH } from "../../src/lib/json-depth";
import { BASE, countRows, jsonRequest, seedWorkflow, sign, transformWorkflow, unique } from "./helpers";

const DEEP = 20_000;
const deepArray = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;
/** `{"a":{"a":…{"a":1}…}}`: `depth` objects. */
const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;

const SIGNED = { webhook: { signature: { secret: "{{ secrets.WEBHOOK_SECRET }}", toleranceSeconds: 300 } } };

/** Everything a start writes for a workflow: executions, identities, and step rows of its executions. */
async function rowsOf(workflowId: string): Promise<number> {
  return (
    (await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", workflowId)) +
    (await countRows("SELECT count(*) AS n FROM execution_identities WHERE workflow_id = ?", workflowId)) +
    (await countRows(
      "SELECT count(*) AS n FROM steps WHERE execution_id IN (SELECT id FROM executions WHERE workflow_id = ?) " +
        "OR execution_id NOT IN (SELECT id FROM executions)",
      workflowId,
    ))
  );
}

async function expectTooDeep(res: Response, depth: number, label: string): Promise<void> {
  expect(res.status, label).toBe(400);
  expect(res.headers.get("content-type"), label).toBe("application/problem+json");
  const problem = await res.json<{ code: string; depth: number; maxDepth: number; detail: string }>();
  expect(problem, label).toMatchObject({ code: "json-too-deep", depth, maxDepth: MAX_JSON_DEPTH });
  expect(problem.detail, label).toContain(String(depth));
  expect(problem.detail, label).toContain(String(MAX_JSON_DEPTH));
}

describe("JSON nested deeper than MAX_JSON_DEPTH", () => {
  it("is refused with 400 json-too-deep on /trigger, test and stream runs, whatever decides the identity, writing nothing", async () => {
    const paths = ["trigger", "trigger?clientIdempotencyId=deep-1", "test-runs", "test-runs?forceNewExecution=false", "stream"];
    for (const [label, entry] of [
      ["content", {}],
      ["fields", { idempotencyFields: "a" }],
    ] as const) {
      const id = unique(`deep-${label}`);
      await seedWorkflow("dev", transformWorkflow(id, entry));
      for (const path of paths) {
        for (const raw of [deepArray(DEEP), deepObject(DEEP)]) {
          const res = await SELF.fetch(jsonRequest(`${BASE}/v1/workflows/${id}/${path}`, null, { token: "dev-token", raw }));
          await expectTooDeep(res, DEEP, `${label} ${path} ${raw.slice(0, 5)}`);
        }
      }
      expect(await rowsOf(id)).toBe(0);
    }
  });

  it("accepts exactly MAX_JSON_DEPTH levels and refuses one more, counting only brackets outside strings", async () => {
    const id = unique("deep-edge");
    await seedWorkflow("dev", transformWorkflow(id));
    const trigger = (raw: string) => SELF.fetch(jsonRequest(`${BASE}/v1/workflows/${id}/trigger`, null, { token: "dev-token", raw }));
    expect((await trigger(deepObject(MAX_JSON_DEPTH))).status).toBe(202);
    await expectTooDeep(await trigger(deepObject(MAX_JSON_DEPTH + 1)), MAX_JSON_DEPTH + 1, "one more");
    // Brackets in strings (escaped quotes too) are text, not nesting.
    const inStrings = JSON.stringify({ s: `"[{`.repeat(1000), t: ["\\", "[[[", '\\"[['] });
    expect((await trigger(inStrings)).status).toBe(202);
    expect(await countRows("SELECT count(*) AS n FROM executions WHERE workflow_id = ?", id)).toBe(2);
  });

  it("is a body of bytes, not JSON, when sent as text: stored as its text", async () => {
    const id = unique("deep-text");
    await seedWorkflow("dev", transformWorkflow(id));
    const raw = deepArray(DEEP);
    const res = await SELF.fetch(
      jsonRequest(`${BASE}/v1/workflows/${id}/trigger`, null, { token: "dev-token", raw, headers: { "content-type": "text/plain" } }),
    );
    expect(res.status).toBe(202);
    const { executionId } = await res.json<{ executionId: string }>();
    const stored = await env.DB.prepare("SELECT payload FROM executions WHERE id = ?").bind(executionId).first<string>("payload");
    expect(JSON.parse(stored!)).toBe(raw);
  });

  it("is refused on the signed hook after the signature, whatever content-type says, writing nothing", async () => {
    const id = unique("deep-hook");
    await seedWorkflow("dev", transformWorkflow(id, SIGNED));
    for (const contentType of ["application/json", "text/plain"]) {
      const raw = deepObject(DEEP);
      const timestamp = Math.floor(Date.now() / 1000).toString();
      const res = await SELF.fetch(
        new Request(`${BASE}/hooks/dev/${id}`, {
          method: "POST",
          headers: {
            "content-type": contentType,
            "x-idemflow-timestamp": timestamp,
            "x-idemflow-signature": await sign(env.WEBHOOK_SECRET, timestamp, raw, { workspace: "dev", workflowId: id }),
          },
          body: raw,
        }),
      );
      await expectTooDeep(res, DEEP, contentType);
    }
    expect(await rowsOf(id)).toBe(0);
  });

  it("is refused on PUT /v1/workflows/:id, saving nothing", async () => {
    const id = unique("deep-put");
    const definition = JSON.stringify(transformWorkflow(id)).replace('"= payload"', deepObject(DEEP));
    const res = await SELF.fetch(
      new Request(`${BASE}/v1/workflows/${id}`, {
        method: "PUT",
        headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
        body: definition,
      }),
    );
    // The TRANSFORM template's 20,000 objects sit under the definition's own 5 levels.
    await expectTooDeep(res, DEEP + 5, "PUT");
    expect(await countRows("SELECT count(*) AS n FROM workflow_versions WHERE workflow_id = ?", id)).toBe(0);
  });
});
