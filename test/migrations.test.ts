/**
 * The migrations themselves, applied in order. Every other test file starts from the template
 * vitest.config.ts builds once per run (test/d1-template.ts, restored by test/apply-migrations.ts);
 * this file keeps that template honest: its database, restored from the template, is emptied and
 * every file of migrations/ applied to it in order, as `readD1Migrations` reads them and the pool's
 * `applyD1Migrations` applies them, and the result must be the template, object for object and row
 * for row. The migrations that rebuild a table are applied to a populated database by their own
 * files (test/ledger/migration-*.test.ts).
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { applyMigrations, dumpDatabase } from "./helpers/d1-dump";

/** The schema as SQLite keeps it: every table, index (its own and SQLite's), view and trigger. */
const schemaOf = async (db: D1Database) =>
  (
    await db
      .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE '_cf_%' ORDER BY type, name")
      .all<{ type: string; name: string; tbl_name: string; sql: string | null }>()
  ).results;

/** Every row of every table, sorted; `d1_migrations.applied_at` (when each ran) left out. */
async function rowsOf(db: D1Database): Promise<Record<string, string[]>> {
  const rows: Record<string, string[]> = Object.create(null);
  for (const { name } of (await schemaOf(db)).filter((o) => o.type === "table")) {
    const { results } = await db.prepare(`SELECT * FROM "${name}"`).all<Record<string, unknown>>();
    rows[name] = results.map((row) => JSON.stringify(name === "d1_migrations" ? { ...row, applied_at: "…" } : row)).sort();
  }
  return rows;
}

let restored: string[];
let emptied: { name: string }[];

beforeAll(async () => {
  restored = await dumpDatabase(env.DB);
  const tables = await env.DB.prepare(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'",
  ).all<{ name: string }>();
  // Views first (migrations/0042's `step_attempts`): a view naming a dropped table makes later DDL fail.
  const views = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'view'").all<{ name: string }>();
  await env.DB.batch([
    env.DB.prepare("PRAGMA defer_foreign_keys = on"),
    ...views.results.map((v) => env.DB.prepare(`DROP VIEW "${v.name}"`)),
    ...tables.results.map((t) => env.DB.prepare(`DROP TABLE "${t.name}"`)),
  ]);
  emptied = (await env.DB.prepare("SELECT name FROM sqlite_master WHERE name NOT LIKE '_cf_%'").all<{ name: string }>()).results;
  await applyMigrations(env.DB, env.TEST_MIGRATIONS);
});

// This file runs in project shard-0 only: `env.DB` is shard 0's database (emptied, then migrated in
// order above) and `env.DB_1` shard 1's, restored from the template and left as it was.
describe("migrations", () => {
  it("the template is every file of migrations/, and a test file's database is restored from it exactly", () => {
    expect(env.TEST_D1_TEMPLATE.migrations).toEqual(env.TEST_MIGRATIONS.map((m) => m.name));
    expect(restored).toEqual(env.TEST_D1_TEMPLATE.statements);
  });

  it("applied in order to an empty database, give the template's schema: every table, index, view and trigger", async () => {
    expect(emptied.filter((o) => o.name !== "sqlite_sequence")).toEqual([]);
    const schema = await schemaOf(env.DB);
    expect(schema.map((o) => o.name)).toEqual(expect.arrayContaining(["executions", "steps", "d1_migrations"]));
    expect(schema.some((o) => o.type === "trigger")).toBe(true);
    expect(schema).toEqual(await schemaOf(env.DB_1));
  });

  it("and its rows, and its AUTOINCREMENT counters", async () => {
    expect(await rowsOf(env.DB)).toEqual(await rowsOf(env.DB_1));
    expect((await rowsOf(env.DB)).d1_migrations).toHaveLength(env.TEST_MIGRATIONS.length);
  });
});
