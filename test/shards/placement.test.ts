/**
 * Where a workspace's requests go (src/shards/placement.ts): the placement fence on shard 0 and the
 * shard schema check. An edited map that moves a workspace without its data must never split its
 * dedupe across two databases: that workspace answers 503 until the map is restored or the move
 * recorded, and nothing is written meanwhile. A shard behind on migrations is never used.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import { forgetPlacements, MAX_REMEMBERED, placeWorkspace, rememberedPlacements } from "../../src/shards/placement";
import { forgetSchemaChecks, LATEST_MIGRATION } from "../../src/shards/schema";
import { countingD1 } from "../helpers/counting-d1";
import { deliveredEnv } from "../helpers/shards";

beforeEach(() => {
  forgetPlacements();
  forgetSchemaChecks();
  for (const level of ["warn", "error"] as const) vi.spyOn(console, level).mockImplementation(() => {});
});
afterEach(() => {
  forgetPlacements();
  forgetSchemaChecks();
  vi.restoreAllMocks();
});

const real = deliveredEnv(env);
const shards = [real.DB, real.DB_1] as const;

/** `env` with the workspaces of `map` and a token per workspace (`<workspace>-token`). */
function envWith(map: string, workspaces: string[]): Env {
  return {
    ...real,
    D1_SHARDS: "DB,DB_1",
    WORKSPACE_SHARDS: map,
    API_TOKENS: workspaces.map((w) => `${w}-token:${w}`).join(","),
    CHAIN_STEPS: "off",
  } as unknown as Env;
}

async function call(e: Env, workspace: string, method: string, path: string, body?: unknown) {
  const ctx = createExecutionContext();
  const headers: Record<string, string> = { authorization: `Bearer ${workspace}-token` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await app.fetch(
    new Request(`http://idemflow.test${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }),
    e,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, retryAfter: res.headers.get("retry-after") };
}

const WORKFLOW = (id: string) => ({
  id,
  vertices: [
    { id: "entry", type: "ENTRY_POINT", config: {} },
    { id: "shape", type: "TRANSFORM", config: { output: "= payload" } },
  ],
  edges: [{ from: "entry", to: "shape" }],
});

async function recorded(workspace: string): Promise<number | null> {
  return real.DB.prepare("SELECT shard FROM workspace_placements WHERE workspace = ?1").bind(workspace).first<number>("shard");
}

async function count(db: D1Database, sql: string, ...params: unknown[]): Promise<number> {
  return (await db
    .prepare(sql)
    .bind(...params)
    .first<number>("n"))!;
}

const workspaceName = (prefix: string) => `${prefix}-${crypto.randomUUID().slice(0, 8)}`;

describe("the placement fence", () => {
  it("records a workspace's shard on shard 0 at its first use, and serves it from that shard", async () => {
    const ws = workspaceName("fresh");
    const e = envWith(`${ws}:1`, [ws]);
    expect(await recorded(ws)).toBeNull();
    expect((await call(e, ws, "PUT", "/v1/workflows/wf", WORKFLOW("wf"))).status).toBe(201);
    expect(await recorded(ws)).toBe(1);
    expect(await count(real.DB_1, "SELECT count(*) AS n FROM workflows WHERE workspace = ?1", ws)).toBe(1);
    expect(await count(real.DB, "SELECT count(*) AS n FROM workflows WHERE workspace = ?1", ws)).toBe(0);
  });

  it("an edited map that moves a workspace without its data answers 503 workspace-misplaced, writes nothing, until restored", async () => {
    const ws = workspaceName("moved");
    const before = envWith(`${ws}:0`, [ws]);
    expect((await call(before, ws, "PUT", "/v1/workflows/wf", WORKFLOW("wf"))).status).toBe(201);
    expect((await call(before, ws, "POST", "/v1/workflows/wf/trigger", { n: 1 })).status).toBe(202);

    // The map now says shard 1; the data (and its dedupe) is on shard 0.
    const edited = envWith(`${ws}:1`, [ws]);
    const refused = await call(edited, ws, "POST", "/v1/workflows/wf/trigger", { n: 1 });
    expect(refused.status).toBe(503);
    expect(refused.retryAfter).toBe("30");
    expect(refused.body).toMatchObject({ code: "workspace-misplaced", workspace: ws, configured: 1, recorded: 0 });
    expect(String(refused.body.detail)).toMatch(/split its deduplication/);
    for (const path of ["/v1/executions", "/v1/workflows", "/v1/secrets"]) expect((await call(edited, ws, "GET", path)).status).toBe(503);
    expect((await call(edited, ws, "PUT", "/v1/workflows/wf2", WORKFLOW("wf2"))).status).toBe(503);
    for (const db of shards) {
      expect(await count(db, "SELECT count(*) AS n FROM executions WHERE workspace = ?1", ws)).toBe(db === real.DB ? 1 : 0);
      expect(await count(db, "SELECT count(*) AS n FROM workflows WHERE workspace = ?1", ws)).toBe(db === real.DB ? 1 : 0);
    }

    // Restored: served again, the duplicate is a duplicate (one dedupe, one database).
    const restored = await call(before, ws, "POST", "/v1/workflows/wf/trigger", { n: 1 });
    expect(restored.status).toBe(200);
    expect(restored.body.deduplicated).toBe(true);
  });

  it("a workspace whose data predates the record is recorded where its data is, not where a new map sends it", async () => {
    const ws = workspaceName("legacy");
    // Written by a version before shards: rows on shard 0, no placement recorded.
    expect((await call(envWith(`${ws}:0`, [ws]), ws, "PUT", "/v1/workflows/wf", WORKFLOW("wf"))).status).toBe(201);
    await real.DB.prepare("DELETE FROM workspace_placements WHERE workspace = ?1").bind(ws).run();
    forgetPlacements();

    const placedElsewhere = envWith(`${ws}:1`, [ws]);
    const refused = await call(placedElsewhere, ws, "POST", "/v1/workflows/wf/trigger", { n: 1 });
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ code: "workspace-misplaced", configured: 1, recorded: 0 });
    expect(await recorded(ws)).toBe(0);
  });

  it("a recorded move is served from the new shard at once (after the isolate's recheck)", async () => {
    const ws = workspaceName("relocated");
    expect((await call(envWith(`${ws}:0`, [ws]), ws, "PUT", "/v1/workflows/wf", WORKFLOW("wf"))).status).toBe(201);
    const moved = envWith(`${ws}:1`, [ws]);
    expect((await call(moved, ws, "GET", "/v1/workflows")).status).toBe(503);
    // The operator copied the rows (here: saved the workflow on shard 1) and recorded the move.
    await real.DB.prepare("UPDATE workspace_placements SET shard = 1 WHERE workspace = ?1").bind(ws).run();
    forgetPlacements();
    expect((await call(moved, ws, "PUT", "/v1/workflows/wf", WORKFLOW("wf"))).status).toBe(201);
    expect(await count(real.DB_1, "SELECT count(*) AS n FROM workflows WHERE workspace = ?1", ws)).toBe(1);
  });

  it("the public hook route records nothing for a workspace anyone may name", async () => {
    const ws = workspaceName("nobody");
    const ctx = createExecutionContext();
    const res = await app.fetch(
      new Request(`http://idemflow.test/hooks/${ws}/wf`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }),
      envWith("", []),
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(res.status).toBe(401);
    expect(await recorded(ws)).toBeNull();
  });

  it("the public routes answer a fenced workspace's anonymous callers 503 naming neither the workspace nor its shards", async () => {
    const ws = workspaceName("fencedpublic");
    expect((await call(envWith(`${ws}:0`, [ws]), ws, "PUT", "/v1/workflows/wf", WORKFLOW("wf"))).status).toBe(201);
    const moved = envWith(`${ws}:1`, [ws]);
    for (const path of [`/hooks/${ws}/wf`, `/events/${ws}/source`]) {
      const ctx = createExecutionContext();
      const res = await app.fetch(
        new Request(`http://idemflow.test${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }),
        moved,
        ctx,
      );
      await waitOnExecutionContext(ctx);
      expect(res.status, path).toBe(503);
      expect(res.headers.get("retry-after"), path).toBe("30");
      const text = await res.text();
      expect(JSON.parse(text), path).toMatchObject({ code: "delivery-unavailable" });
      expect(text, path).not.toContain(ws);
      expect(text, path).not.toMatch(/shard|"configured"|"recorded"|"workspace"/i);
    }
    // The authenticated API still says why, to the workspace's own token.
    expect((await call(moved, ws, "GET", "/v1/workflows")).body).toMatchObject({ code: "workspace-misplaced", workspace: ws });
  });

  it('the public routes keep nothing for "no record yet": a record made meanwhile elsewhere fences the next request', async () => {
    const ws = workspaceName("hooked");
    const e = envWith(`${ws}:1`, [ws]);
    const t = Date.now();
    await expect(placeWorkspace(e, ws, { record: false, now: t })).resolves.toMatchObject({ shard: 1 });
    expect(await recorded(ws)).toBeNull();
    expect(rememberedPlacements()).toBe(0);
    // Another isolate records the workspace on shard 0 (its data is there).
    await real.DB.prepare("INSERT INTO workspace_placements (workspace, shard, placed_at) VALUES (?1, 0, ?2)").bind(ws, t).run();
    await expect(placeWorkspace(e, ws, { record: false, now: t + 1_000 })).rejects.toMatchObject({ code: "workspace-misplaced" });
  });

  it("anonymous requests naming unknown workspaces neither fill the fence cache nor evict a real workspace from it", async () => {
    const ws = workspaceName("real");
    const e = envWith(`${ws}:1`, [ws]);
    expect((await call(e, ws, "PUT", "/v1/workflows/wf", WORKFLOW("wf"))).status).toBe(201);
    expect(rememberedPlacements()).toBe(1);
    const anonymous = async (path: string) => {
      const ctx = createExecutionContext();
      const res = await app.fetch(
        new Request(`http://idemflow.test${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }),
        e,
        ctx,
      );
      await waitOnExecutionContext(ctx);
      return res.status;
    };
    for (let i = 0; i < 40; i++) {
      expect(await anonymous(`/hooks/junk-${i}-${crypto.randomUUID()}/wf`)).toBeLessThan(500);
      expect(await anonymous(`/events/junk-${i}-${crypto.randomUUID()}/source`)).toBeLessThan(500);
    }
    // Nothing was kept for the junk names, and nothing recorded; the real workspace is still remembered.
    expect(rememberedPlacements()).toBe(1);
    expect(await count(real.DB, "SELECT count(*) AS n FROM workspace_placements WHERE workspace LIKE 'junk-%'")).toBe(0);
    // So its next request asks shard 0 nothing.
    const counted = countingD1(real.DB);
    expect((await call({ ...e, DB: counted.db } as unknown as Env, ws, "GET", "/v1/workflows")).status).toBe(200);
    expect(counted.statements()).toBe(0);
    expect(MAX_REMEMBERED).toBeGreaterThan(0);
  });

  it("user-named workspaces are keys of the map and the record, never object members", async () => {
    for (const ws of ["__proto__", "constructor"]) {
      const e = envWith(`${ws}:1`, [ws]);
      expect((await call(e, ws, "PUT", "/v1/workflows/wf", WORKFLOW("wf"))).status).toBe(201);
      expect(await recorded(ws)).toBe(1);
    }
  });
});

describe("the shard schema check", () => {
  it("a shard whose applied migrations lag the engine's answers 503 shard-schema-behind, and is used once migrated", async () => {
    const ws = workspaceName("behind");
    const e = envWith(`${ws}:1`, [ws]);
    const latest = await real.DB_1.prepare("SELECT id, name, applied_at FROM d1_migrations WHERE name = ?1")
      .bind(LATEST_MIGRATION)
      .first<{ id: number; name: string; applied_at: string }>();
    expect(latest).not.toBeNull();
    await real.DB_1.prepare("DELETE FROM d1_migrations WHERE name = ?1").bind(LATEST_MIGRATION).run();
    try {
      const refused = await call(e, ws, "PUT", "/v1/workflows/wf", WORKFLOW("wf"));
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ code: "shard-schema-behind", shard: 1, expected: LATEST_MIGRATION });
      expect(await count(real.DB_1, "SELECT count(*) AS n FROM workflows WHERE workspace = ?1", ws)).toBe(0);
    } finally {
      await real.DB_1.prepare("INSERT INTO d1_migrations (id, name, applied_at) VALUES (?1, ?2, ?3)")
        .bind(latest!.id, latest!.name, latest!.applied_at)
        .run();
    }
    forgetSchemaChecks();
    expect((await call(e, ws, "PUT", "/v1/workflows/wf", WORKFLOW("wf"))).status).toBe(201);
  });
});
