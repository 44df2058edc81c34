import { env, SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { getWorkflow, listWorkflows, saveWorkflow, versionOf } from "../../../src/definitions/store";
import { validateDefinition } from "../../../src/definitions/validate";
import { countingD1 } from "../../helpers/counting-d1";

const BASE = "http://idemflow.test/v1/workflows";
const DEV = { authorization: "Bearer dev-token" };
const OTHER = { authorization: "Bearer other-token" };

function definition(id: string, greeting = "hello") {
  return {
    $schema: "../schema/workflow.schema.json",
    id,
    vertices: [
      { id: "received", type: "ENTRY_POINT" },
      { id: "greet", type: "TRANSFORM", config: { output: { greeting, to: "= payload.name" } } },
    ],
    edges: [{ from: "received", to: "greet" }],
  };
}

function put(id: string, body: unknown, headers: Record<string, string> = DEV): Promise<Response> {
  return SELF.fetch(`${BASE}/${id}`, {
    method: "PUT",
    headers: { ...headers, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

async function versionRows(workspace: string, workflowId: string): Promise<number> {
  const row = await env.DB.prepare("SELECT count(*) AS n FROM workflow_versions WHERE workspace = ?1 AND workflow_id = ?2")
    .bind(workspace, workflowId)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

describe("PUT /v1/workflows/{id}", () => {
  it("saves a new version with 201, and the same content again with 200, the same version and no new row", async () => {
    const first = await put("put-twice", definition("put-twice"));
    expect(first.status).toBe(201);
    const a = await first.json<{ version: string; created: boolean }>();
    expect(a).toMatchObject({ workflowId: "put-twice", created: true });
    expect(a.version).toMatch(/^[0-9a-f]{64}$/);
    expect(first.headers.get("location")).toBe(`/v1/workflows/put-twice?version=${a.version}`);

    // Same content, different key order, whitespace and $schema path: same version.
    const reordered = {
      edges: definition("put-twice").edges,
      vertices: definition("put-twice").vertices,
      id: "put-twice",
      $schema: "x.json",
    };
    const second = await put("put-twice", JSON.stringify(reordered, null, 4));
    expect(second.status).toBe(200);
    expect(await second.json()).toEqual({ workflowId: "put-twice", version: a.version, created: false });
    expect(await versionRows("dev", "put-twice")).toBe(1);
  });

  it("keeps every version immutable and serves the latest by default, older ones by ?version=", async () => {
    const v1 = await (await put("versions", definition("versions", "hello"))).json<{ version: string }>();
    const v2res = await put("versions", definition("versions", "bonjour"));
    expect(v2res.status).toBe(201);
    const v2 = await v2res.json<{ version: string }>();
    expect(v2.version).not.toBe(v1.version);

    const latest = await (
      await SELF.fetch(`${BASE}/versions`, { headers: DEV })
    ).json<{ version: string; definition: { vertices: unknown[] } }>();
    expect(latest.version).toBe(v2.version);
    expect(JSON.stringify(latest.definition)).toContain("bonjour");
    expect(latest.definition).not.toHaveProperty("$schema");

    const old = await SELF.fetch(`${BASE}/versions?version=${v1.version}`, { headers: DEV });
    expect(old.status).toBe(200);
    expect(JSON.stringify(await old.json())).toContain("hello");
    expect(await versionRows("dev", "versions")).toBe(2);
  });

  it("answers 422 problem+json listing every error with its pointer, and writes nothing", async () => {
    const bad = definition("bad-def") as { vertices: Array<Record<string, unknown>>; edges: unknown[] };
    bad.vertices.push({ id: "island", type: "TRANSFORM", config: { output: "= payload.(" } });
    bad.edges.push({ from: "greet", to: "nowhere" });
    const res = await put("bad-def", bad);
    expect(res.status).toBe(422);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    const problem = await res.json<{ code: string; errors: Array<{ pointer: string; code: string }> }>();
    expect(problem.code).toBe("invalid-definition");
    expect(problem.errors.map((e) => [e.pointer, e.code])).toEqual(
      expect.arrayContaining([
        ["/edges/1/to", "unknown-edge-target"],
        ["/vertices/2", "unreachable-vertex"],
        ["/vertices/2/config/output", "expression-syntax"],
      ]),
    );
    expect(problem.errors).toHaveLength(3);
    expect(await versionRows("dev", "bad-def")).toBe(0);
  });

  it("requires the path id to equal the body id (422 at /id)", async () => {
    const res = await put("path-id", definition("body-id"));
    expect(res.status).toBe(422);
    const problem = await res.json<{ errors: Array<{ pointer: string; code: string }> }>();
    expect(problem.errors).toEqual([expect.objectContaining({ pointer: "/id", code: "id-mismatch" })]);
    expect(await versionRows("dev", "body-id")).toBe(0);
    expect(await versionRows("dev", "path-id")).toBe(0);
  });

  it("answers malformed JSON with 400 problem+json", async () => {
    const res = await put("malformed", '{"id": "malformed", "vertices": [');
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(await res.json()).toMatchObject({ code: "malformed-json", status: 400 });
    expect((await put("malformed", "")).status).toBe(400);
  });

  it("answers a body over 256 KiB with 413 problem+json, with or without content-length", async () => {
    const big = definition("too-big", "x".repeat(300 * 1024));
    const res = await put("too-big", big);
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ code: "payload-too-large" });

    // A streamed body has no content-length: the limit is enforced while reading.
    const bytes = new TextEncoder().encode(JSON.stringify(big));
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 16 * 1024) controller.enqueue(bytes.slice(i, i + 16 * 1024));
        controller.close();
      },
    });
    const streamed = await SELF.fetch(`${BASE}/too-big`, {
      method: "PUT",
      headers: { ...DEV, "content-type": "application/json" },
      body: stream,
    });
    expect(streamed.status).toBe(413);
    expect(await versionRows("dev", "too-big")).toBe(0);
  });

  it("requires a bearer token (401)", async () => {
    const res = await put("no-token", definition("no-token"), {});
    expect(res.status).toBe(401);
    expect((await SELF.fetch(`${BASE}`)).status).toBe(401);
    expect((await SELF.fetch(`${BASE}/x`, { headers: { authorization: "Bearer nope" } })).status).toBe(401);
  });
});

describe("workspaces", () => {
  it("never leak definitions across workspaces: GET and list see only their own, the same id is independent", async () => {
    const mine = await (await put("shared-name", definition("shared-name", "dev's"))).json<{ version: string }>();
    expect((await SELF.fetch(`${BASE}/shared-name`, { headers: OTHER })).status).toBe(404);
    expect((await SELF.fetch(`${BASE}/shared-name?version=${mine.version}`, { headers: OTHER })).status).toBe(404);
    const otherList = await (await SELF.fetch(BASE, { headers: OTHER })).json<{ items: Array<{ workflowId: string }> }>();
    expect(otherList.items.map((i) => i.workflowId)).not.toContain("shared-name");

    // The other workspace saves its own definition under the same id: a separate, new version row.
    const theirs = await put("shared-name", definition("shared-name", "other's"), OTHER);
    expect(theirs.status).toBe(201);
    const mineAgain = await (await SELF.fetch(`${BASE}/shared-name`, { headers: DEV })).json<{ definition: unknown }>();
    expect(JSON.stringify(mineAgain.definition)).toContain("dev's");
    const theirsRead = await (await SELF.fetch(`${BASE}/shared-name`, { headers: OTHER })).json<{ definition: unknown }>();
    expect(JSON.stringify(theirsRead.definition)).toContain("other's");

    // Identical content in two workspaces: same version hash, but each workspace has its own row.
    const same = await put("same-content", definition("same-content"));
    const sameOther = await put("same-content", definition("same-content"), OTHER);
    expect(same.status).toBe(201);
    expect(sameOther.status).toBe(201);
    expect((await same.json<{ version: string }>()).version).toBe((await sameOther.json<{ version: string }>()).version);
  });

  it("answers 404 problem+json for a workflow that does not exist", async () => {
    const res = await SELF.fetch(`${BASE}/never-saved`, { headers: DEV });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: "not-found" });
    expect((await SELF.fetch(`${BASE}/never-saved?version=nothex`, { headers: DEV })).status).toBe(400);
  });
});

describe("GET /v1/workflows", () => {
  it("lists the workspace's workflows by id, a page at a time", async () => {
    for (const id of ["list-a", "list-b", "list-c"]) await put(id, definition(id), { authorization: "Bearer other-token" });
    const page1 = await (
      await SELF.fetch(`${BASE}?after=list-&limit=2`, { headers: OTHER })
    ).json<{ items: Array<{ workflowId: string; latestVersion: string }>; next: string }>();
    expect(page1.items.map((i) => i.workflowId)).toEqual(["list-a", "list-b"]);
    expect(page1.next).toBe("list-b");
    const page2 = await (
      await SELF.fetch(`${BASE}?after=${page1.next}&limit=2`, { headers: OTHER })
    ).json<{ items: Array<{ workflowId: string }> }>();
    expect(page2.items[0]?.workflowId).toBe("list-c");
    expect((await SELF.fetch(`${BASE}?limit=0`, { headers: OTHER })).status).toBe(400);
  });
});

describe("the store", () => {
  function parsed(id: string, greeting?: string) {
    const result = validateDefinition(definition(id, greeting));
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    return result.definition;
  }

  it("saves in one round trip (one batch) and reads in one", async () => {
    const counting = countingD1(env.DB);
    await saveWorkflow(counting.db, "budget", parsed("budget"), 1_000);
    expect(counting.roundTrips()).toBe(1);
    counting.reset();
    await saveWorkflow(counting.db, "budget", parsed("budget"), 2_000);
    expect(counting.roundTrips()).toBe(1);
    counting.reset();
    expect(await getWorkflow(counting.db, "budget", "budget")).not.toBeNull();
    expect(counting.roundTrips()).toBe(1);
    counting.reset();
    await listWorkflows(counting.db, "budget");
    expect(counting.roundTrips()).toBe(1);
  });

  it("saves concurrent identical PUTs as one version row", async () => {
    const results = await Promise.all(Array.from({ length: 8 }, () => saveWorkflow(env.DB, "race", parsed("race"), 5_000)));
    expect(new Set(results.map((r) => r.version)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(await versionRows("race", "race")).toBe(1);
  });

  it("moves the latest pointer back when an older version is saved again, without a new row", async () => {
    const a = await saveWorkflow(env.DB, "revert", parsed("revert", "a"), 1);
    await saveWorkflow(env.DB, "revert", parsed("revert", "b"), 2);
    const again = await saveWorkflow(env.DB, "revert", parsed("revert", "a"), 3);
    expect(again).toEqual({ version: a.version, created: false });
    expect((await getWorkflow(env.DB, "revert", "revert"))?.version).toBe(a.version);
    expect(await versionRows("revert", "revert")).toBe(2);
  });

  it("does not include $schema in the version", async () => {
    const withHint = { ...parsed("hint"), $schema: "../schema/workflow.schema.json" };
    expect((await versionOf(withHint)).version).toBe((await versionOf(parsed("hint"))).version);
  });
});
