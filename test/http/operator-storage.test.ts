/**
 * GET /v1/operator/storage (src/http/routes/operator.ts): the database's storage figures, served to
 * an OPERATOR_TOKENS token only, over the real D1 of this test file. The count of executions is
 * taken again when an hour old (migrations/0024: no trigger writes a row per execution any more),
 * and the storage task's log line is `storage.high` from 80 % of the limit up.
 */
import { env, SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { storageHighLine, storageTask } from "../../src/history/storage-task";
import {
  D1_MAX_DATABASE_BYTES,
  EXECUTIONS_RECOUNT_MS,
  readStorage,
  recountExecutions,
  STORAGE_HIGH_FRACTION,
  type StorageFigures,
} from "../../src/ledger";
import { jsonRequest, seedWorkflow, transformWorkflow, unique } from "../ingress/helpers";

const BASE = "http://idemflow.test";
const STORAGE = `${BASE}/v1/operator/storage`;
const OPERATOR = { authorization: "Bearer operator-token" };
const DEV = { authorization: "Bearer dev-token" };

type Figures = StorageFigures & { note: string; shards: Array<StorageFigures & { shard: number; binding: string }> };

async function executionRows(): Promise<number> {
  const row = await env.DB.prepare("SELECT count(*) AS n FROM executions").first<{ n: number }>();
  return row!.n;
}

async function figures(): Promise<Figures> {
  const response = await SELF.fetch(STORAGE, { headers: OPERATOR });
  expect(response.status).toBe(200);
  return response.json<Figures>();
}

/** A bare finished execution: every NOT NULL column, no steps (so it can be deleted alone). */
function bareExecution(id: string, payload = "{}") {
  return env.DB.prepare(
    `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status, payload,
                             lineage_id, created_at, updated_at, finished_at)
     VALUES (?1, 'storage-test', 'wf', 'v1', 'received', 'test', 'forced', NULL, 'COMPLETED', ?2, ?1, 1, 1, 2)`,
  ).bind(id, payload);
}

describe("GET /v1/operator/storage", () => {
  it("answers an operator token the figures: the size from D1, the 10 GB limit, the executions counted, the note", async () => {
    const workflowId = unique("storage");
    await seedWorkflow("dev", transformWorkflow(workflowId));
    for (let i = 0; i < 3; i++) {
      const run = await SELF.fetch(
        jsonRequest(`${BASE}/v1/workflows/${workflowId}/test-runs`, { order: { id: i } }, { token: "dev-token" }),
      );
      expect(run.status).toBe(202);
    }
    const rows = await executionRows();
    expect(rows).toBeGreaterThanOrEqual(3);

    const response = await SELF.fetch(STORAGE, { headers: OPERATOR });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    const body = await response.json<Figures>();
    expect(Object.keys(body).sort()).toEqual(
      [
        "bytesPerExecution",
        "executionsCountedAt",
        "executionsRetained",
        "limitBytes",
        "note",
        "shards",
        "sizeBytes",
        "usedFraction",
      ].sort(),
    );
    // Every shard is its own database with its own figures, in shard order; shard 0's are also the top level.
    expect(body.shards.map((s) => [s.shard, s.binding])).toEqual([
      [0, "DB"],
      [1, "DB_1"],
    ]);
    const { shard: _shard, binding: _binding, ...first } = body.shards[0]!;
    expect(first).toEqual({ ...body, shards: undefined, note: undefined, ...first });
    expect(body.shards[1]!.executionsRetained).toBe(0);
    expect(body.shards[1]!.sizeBytes).toBeGreaterThan(0);
    expect(body.executionsRetained).toBe(rows);
    expect(body.sizeBytes).toBeGreaterThan(0);
    expect(Number.isInteger(body.sizeBytes)).toBe(true);
    expect(body.limitBytes).toBe(10_000_000_000);
    expect(body.bytesPerExecution).toBe(Math.round(body.sizeBytes / rows));
    expect(body.usedFraction).toBeCloseTo(body.sizeBytes / 10_000_000_000, 12);
    expect(body.note).toMatch(/never shrinks/);
    expect(body.note).toMatch(/reclaims/);
    expect(body.note).toMatch(/every workspace/);
  });

  it("counts the pages in use: locally the figure grows with rows and falls when they are deleted (the file does not)", async () => {
    const before = await figures();
    const payload = JSON.stringify({ blob: "x".repeat(10_000) });
    const ids = Array.from({ length: 40 }, () => unique("big"));
    await env.DB.batch(ids.map((id) => bareExecution(id, payload)));
    const grown = await figures();
    expect(grown.sizeBytes).toBeGreaterThan(before.sizeBytes + 40 * 10_000);
    await env.DB.prepare("DELETE FROM executions WHERE id IN (SELECT value FROM json_each(?1))").bind(JSON.stringify(ids)).run();
    const after = await figures();
    expect(after.sizeBytes).toBeLessThan(grown.sizeBytes - 40 * 10_000);
    expect(after.executionsRetained).toBe(before.executionsRetained);
  });

  it("reads the figures with one statement and no count; an hour-old count is taken again in one more", async () => {
    const statements: string[] = [];
    const db = new Proxy(env.DB, {
      get(target, name, receiver) {
        if (name !== "prepare") return Reflect.get(target, name, receiver) as unknown;
        return (sql: string) => {
          statements.push(sql);
          return target.prepare(sql);
        };
      },
    });
    const read = await readStorage(db);
    expect(statements).toHaveLength(1);
    expect(statements[0]).not.toMatch(/count\(/i);
    const now = Date.now();
    const counted = await recountExecutions(db, now);
    expect(statements).toHaveLength(2);
    expect(counted).toEqual({
      ...read,
      executionsRetained: await executionRows(),
      executionsCountedAt: now,
      bytesPerExecution: counted.bytesPerExecution,
      sizeBytes: counted.sizeBytes,
      usedFraction: counted.usedFraction,
    });
    expect(await readStorage(env.DB)).toMatchObject({ executionsRetained: counted.executionsRetained, executionsCountedAt: now });
  });

  it("answers a workspace token 403 operator-token-required: the figures describe every workspace", async () => {
    for (const token of ["dev-token", "other-token"]) {
      const response = await SELF.fetch(STORAGE, { headers: { authorization: `Bearer ${token}` } });
      expect(response.status).toBe(403);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      const problem = await response.json<{ code: string; detail: string }>();
      expect(problem.code).toBe("operator-token-required");
      expect(problem.detail).toMatch(/every workspace/);
      expect(problem.detail).toMatch(/operator token/);
    }
  });

  it("answers no token, a malformed header and an unknown token 401", async () => {
    for (const headers of [{}, { authorization: "operator-token" }, { authorization: "Bearer not-a-token" }] as Array<
      Record<string, string>
    >) {
      const response = await SELF.fetch(STORAGE, { headers });
      expect(response.status).toBe(401);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      expect(response.headers.get("www-authenticate")).toBe('Bearer realm="idemflow"');
      expect((await response.json<{ code: string }>()).code).toBe("unauthorized");
    }
  });

  it("grants an operator token no workspace route", async () => {
    for (const path of ["/v1/executions", "/v1/workflows", "/v1/stats", "/v1/secrets"]) {
      const response = await SELF.fetch(`${BASE}${path}`, { headers: OPERATOR });
      expect(response.status, path).toBe(401);
      expect((await response.json<{ code: string }>()).code, path).toBe("unauthorized");
    }
    // The workspace token still reads its own routes.
    expect((await SELF.fetch(`${BASE}/v1/executions`, { headers: DEV })).status).toBe(200);
  });

  it("counts the executions exactly when it counts, across inserts and deletes; no row is written per execution", async () => {
    const count = async () => (await recountExecutions(env.DB, Date.now())).executionsRetained;
    const before = await count();
    expect(before).toBe(await executionRows());
    const ids = Array.from({ length: 5 }, () => unique("bare"));
    // An insert writes the execution's row and its indexes, nothing more (no counter row).
    const inserted = await env.DB.batch(ids.map((id) => bareExecution(id)));
    expect(inserted.map((r) => r.meta.rows_written)).toEqual(ids.map(() => inserted[0]!.meta.rows_written));
    expect(await count()).toBe(before + 5);
    await env.DB.prepare("DELETE FROM executions WHERE id IN (SELECT value FROM json_each(?1))")
      .bind(JSON.stringify(ids.slice(0, 3)))
      .run();
    expect(await count()).toBe(before + 2);
    expect(await count()).toBe(await executionRows());
    const triggers = await env.DB.prepare(
      "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'executions_counted%'",
    ).all();
    expect(triggers.results).toEqual([]);
  });
});

describe("storageTask", () => {
  const at = (usedFraction: number): StorageFigures & { shard: number } => {
    const sizeBytes = Math.round(usedFraction * D1_MAX_DATABASE_BYTES);
    return {
      sizeBytes,
      limitBytes: D1_MAX_DATABASE_BYTES,
      executionsRetained: 1000,
      executionsCountedAt: 1,
      bytesPerExecution: sizeBytes / 1000,
      usedFraction,
      shard: 0,
    };
  };

  it("logs nothing at 79 % and storage.high (warn) at 80 % and above", () => {
    expect(STORAGE_HIGH_FRACTION).toBe(0.8);
    expect(storageTask.logLine(at(0.79))).toBeNull();
    expect(storageTask.logLine(at(0.7999999))).toBeNull();
    const line = storageTask.logLine(at(0.8));
    expect(line).toMatchObject({
      level: "warn",
      event: "storage.high",
      fields: { trigger: "cron", sizeBytes: 8_000_000_000, limitBytes: 10_000_000_000, usedFraction: 0.8, executionsRetained: 1000 },
    });
    expect(storageTask.logLine(at(0.95))?.event).toBe("storage.high");
    expect(storageHighLine(at(0.8), "operator")?.fields.trigger).toBe("operator");
  });

  it("reads the figures of the database it runs on, and counts the executions again once the count is an hour old", async () => {
    const tick = (at: number) => storageTask.run(env, { cron: "* * * * *", scheduledTime: at }, {} as ExecutionContext);
    const start = Date.now() + 10 * EXECUTIONS_RECOUNT_MS; // past any count an earlier test took
    const report = await tick(start);
    expect(report.executionsRetained).toBe(await executionRows());
    expect(report.executionsCountedAt).toBe(start);
    expect(report.sizeBytes).toBeGreaterThan(0);
    expect(storageTask.logLine(report)).toBeNull(); // a test database is far from 8 GB

    await env.DB.batch([bareExecution(unique("counted"))]);
    const soon = await tick(start + EXECUTIONS_RECOUNT_MS - 1);
    expect(soon).toMatchObject({ executionsRetained: report.executionsRetained, executionsCountedAt: start });
    const later = await tick(start + EXECUTIONS_RECOUNT_MS);
    expect(later).toMatchObject({ executionsRetained: report.executionsRetained + 1, executionsCountedAt: start + EXECUTIONS_RECOUNT_MS });
  });
});
